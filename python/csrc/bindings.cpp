// Python module loom.torch._C: the constructor torch.distributed calls through loom.torch's
// registration, and the loom-specific methods of the backend.
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/extension.h>

#include <chrono>
#include <loom/version.hpp>
#include <map>
#include <optional>
#include <string>

#include "loom_backend.hpp"

namespace py = pybind11;

namespace {

c10::intrusive_ptr<loom_torch::ProcessGroupLoom> create(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, double timeout_s,
    std::map<std::string, std::string> settings, std::optional<bool> deterministic,
    std::string group_name, int cuda_device) {
  loom_torch::BackendConfig config;
  config.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000.0));
  config.settings = std::move(settings);
  config.deterministic = deterministic;
  config.group_name = std::move(group_name);
  config.cuda_device = cuda_device;
  py::gil_scoped_release no_gil;  // joining blocks until every rank arrives
  return c10::make_intrusive<loom_torch::ProcessGroupLoom>(store, rank, size, std::move(config));
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "loom's torch.distributed backend (see loom.torch)";
  py::object backend_type =
      py::module_::import("torch._C._distributed_c10d").attr("Backend");  // registers the base
  (void)backend_type;
  py::class_<loom_torch::ProcessGroupLoom, c10d::Backend,
             c10::intrusive_ptr<loom_torch::ProcessGroupLoom>>(m, "ProcessGroupLoom")
      .def("loom_status", &loom_torch::ProcessGroupLoom::loom_status,
           py::call_guard<py::gil_scoped_release>(),
           "loom's one-line status of this group's communicator")
      .def("flight_record", &loom_torch::ProcessGroupLoom::flight_record,
           py::call_guard<py::gil_scoped_release>(),
           "loom's flight record of this group's communicator (JSON text)")
      .def("failed_ranks", &loom_torch::ProcessGroupLoom::failed_ranks,
           py::call_guard<py::gil_scoped_release>(), "ranks of this group known to have failed");
  m.def("create_backend", &create, py::arg("store"), py::arg("rank"), py::arg("size"),
        py::arg("timeout_s"), py::arg("settings"), py::arg("deterministic"), py::arg("group_name"),
        py::arg("cuda_device") = -1);
  m.attr("loom_version") = std::string(loom::kVersionString);
  // setup.py defines it when the loom it links was built with the CUDA path (LOOM_CUDA).
#ifdef LOOM_TORCH_LOOM_CUDA
  m.attr("loom_has_cuda") = true;
#else
  m.attr("loom_has_cuda") = false;
#endif
}
