// The registry of device runtimes (device.hpp): a small table by name. The library's own
// runtime, CUDA, is in it from the start when loom is built with CUDA; the testing library
// (cmake/LoomTesting.cmake) adds host-sim when a program linking it starts.
#include "device/device.hpp"

#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace loom::device {
namespace {

struct Registry {
  std::mutex mu;
  std::vector<std::pair<std::string, RuntimeFactory>> runtimes;
};

// Built on first use (registrations may come from other files' static initializers) and never
// destroyed (a lookup may come from another static object's destructor).
Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry;
#if defined(LOOM_HAVE_CUDA)
    reg->runtimes.emplace_back("cuda", &cuda_device);
#endif
    return reg;
  }();
  return *r;
}

RuntimeFactory find_runtime(std::string_view name) {
  Registry& r = registry();
  std::lock_guard lk(r.mu);
  for (const auto& [n, factory] : r.runtimes)
    if (n == name) return factory;
  return nullptr;
}

}  // namespace

void register_runtime(std::string_view name, RuntimeFactory factory) {
  Registry& r = registry();
  std::lock_guard lk(r.mu);
  for (auto& [n, f] : r.runtimes)
    if (n == name) {
      f = factory;
      return;
    }
  r.runtimes.emplace_back(std::string(name), factory);
}

Result<Device*> device_by_name(std::string_view name) {
  if (name == "none") return static_cast<Device*>(nullptr);
  if (name == "auto") {
    RuntimeFactory cuda = find_runtime("cuda");
    return cuda != nullptr ? cuda() : static_cast<Device*>(nullptr);
  }
  if (RuntimeFactory factory = find_runtime(name)) {
    Device* d = factory();
    if (d == nullptr)
      return make_error(ErrorCode::InvalidUsage, "LOOM_DEVICE={} but no {} GPU is visible", name,
                        name == "cuda" ? "CUDA" : name);
    return d;
  }
  if (name == "cuda")
    return make_error(ErrorCode::InvalidUsage,
                      "LOOM_DEVICE=cuda but this loom was built without CUDA (LOOM_CUDA=OFF or "
                      "no nvcc at configure time)");
  if (name == "host-sim")
    return make_error(ErrorCode::InvalidUsage,
                      "LOOM_DEVICE=host-sim: host-sim is a test device: link loom_testing (loom's "
                      "tests, loom-info, loom-perf and the benchmarks do; this program does not)");
  return make_error(ErrorCode::InvalidUsage,
                    "LOOM_DEVICE='{}' is not one of: auto, cuda, host-sim, none", name);
}

}  // namespace loom::device
