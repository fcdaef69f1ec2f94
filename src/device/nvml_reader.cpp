// nvml_links(): NVML loaded with dlopen (see nvlink.hpp). Only the handful of entry points the
// NVLink table needs are resolved; NVML is initialised once per process and left initialised.
#include <fmt/format.h>

#include "device/nvlink.hpp"

#if defined(LOOM_HAVE_NVML)
#include <dlfcn.h>
#include <nvml.h>

#include <map>
#include <memory>
#include <mutex>
#endif

namespace loom::device {

#if defined(LOOM_HAVE_NVML)
namespace {

struct Nvml {
  void* lib = nullptr;
  decltype(&nvmlInit_v2) init = nullptr;
  decltype(&nvmlErrorString) error_string = nullptr;
  decltype(&nvmlDeviceGetHandleByPciBusId_v2) by_bus_id = nullptr;
  decltype(&nvmlDeviceGetNvLinkState) link_state = nullptr;
  decltype(&nvmlDeviceGetNvLinkRemotePciInfo_v2) remote_pci = nullptr;
  decltype(&nvmlDeviceGetNvLinkRemoteDeviceType) remote_type = nullptr;
};

template <typename Fn>
bool resolve(void* lib, const char* name, Fn& fn) {
  fn = reinterpret_cast<Fn>(::dlsym(lib, name));
  return fn != nullptr;
}

Result<Nvml> load(const std::string& library) {
  Nvml n;
  n.lib = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!n.lib) {
    const char* why = ::dlerror();
    return make_error(ErrorCode::SystemError, "cannot load NVML ({}): {}", library,
                      why ? why : "dlopen failed");
  }
  bool ok = resolve(n.lib, "nvmlInit_v2", n.init) &&
            resolve(n.lib, "nvmlErrorString", n.error_string) &&
            resolve(n.lib, "nvmlDeviceGetHandleByPciBusId_v2", n.by_bus_id) &&
            resolve(n.lib, "nvmlDeviceGetNvLinkState", n.link_state) &&
            resolve(n.lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2", n.remote_pci) &&
            resolve(n.lib, "nvmlDeviceGetNvLinkRemoteDeviceType", n.remote_type);
  if (!ok) {
    ::dlclose(n.lib);
    return make_error(ErrorCode::SystemError, "{} lacks an NVML entry point loom needs", library);
  }
  if (nvmlReturn_t r = n.init(); r != NVML_SUCCESS) {
    std::string why = n.error_string(r);
    ::dlclose(n.lib);
    return make_error(ErrorCode::SystemError, "nvmlInit failed ({}): {}", library, why);
  }
  return n;
}

// One load per library path for the process's lifetime (NVML stays initialised).
Result<const Nvml*> nvml(std::string_view library) {
  static std::mutex mu;
  static std::map<std::string, Result<Nvml>, std::less<>> loaded;
  std::lock_guard lock(mu);
  auto it = loaded.find(library);
  if (it == loaded.end())
    it = loaded.emplace(std::string(library), load(std::string(library))).first;
  if (!it->second.is_ok()) return it->second.status();
  return &*it->second;
}

Result<NvLink> read_link(const Nvml& n, nvmlDevice_t dev, unsigned link) {
  NvLink out;
  nvmlEnableState_t state = NVML_FEATURE_DISABLED;
  nvmlReturn_t r = n.link_state(dev, link, &state);
  if (r == NVML_ERROR_INVALID_ARGUMENT || r == NVML_ERROR_NOT_SUPPORTED) return out;
  if (r != NVML_SUCCESS)
    return make_error(ErrorCode::SystemError, "nvmlDeviceGetNvLinkState(link {}): {}", link,
                      n.error_string(r));
  out.active = state == NVML_FEATURE_ENABLED;
  if (!out.active) return out;
  nvmlPciInfo_t pci{};
  if ((r = n.remote_pci(dev, link, &pci)) != NVML_SUCCESS)
    return make_error(ErrorCode::SystemError, "nvmlDeviceGetNvLinkRemotePciInfo(link {}): {}", link,
                      n.error_string(r));
  out.remote_bus_id = canonical_bus_id(pci.busId);
  nvmlIntNvLinkDeviceType_t type = NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
  if (n.remote_type(dev, link, &type) == NVML_SUCCESS)
    out.remote_is_switch = type == NVML_NVLINK_DEVICE_TYPE_SWITCH;
  return out;
}

}  // namespace

Result<std::vector<NvLink>> nvml_links(std::string_view library, std::string_view bus_id) {
  LOOM_ASSIGN_OR_RETURN(const Nvml* n, nvml(library));
  nvmlDevice_t dev{};
  const std::string id(bus_id);
  if (nvmlReturn_t r = n->by_bus_id(id.c_str(), &dev); r != NVML_SUCCESS)
    return make_error(ErrorCode::SystemError, "NVML knows no GPU at {}: {}", id,
                      n->error_string(r));
  std::vector<NvLink> links;
  for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS; ++link) {
    LOOM_ASSIGN_OR_RETURN(NvLink l, read_link(*n, dev, link));
    links.push_back(std::move(l));
  }
  return links;
}

#else

Result<std::vector<NvLink>> nvml_links(std::string_view, std::string_view) {
  return make_error(ErrorCode::SystemError,
                    "this build has no NVML support (built without CUDA, or without nvml.h: "
                    "pip install nvidia-nvml-dev-cu12 and reconfigure)");
}

#endif

}  // namespace loom::device
