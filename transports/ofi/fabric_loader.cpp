// libfabric is loaded with dlopen() on first use instead of being linked.
//
// Linking libfabric costs every loom process ~0.2 s at start-up, whether or not it ever uses
// the ofi transport: Debian's libfabric pulls in libpsm_infinipath and libpsm2, whose library
// constructors each calibrate a clock by sleeping ~0.1 s. A job that never touches ofi (the
// default without EFA) should not pay that, so loom compiles against libfabric's headers only
// and defines here the handful of functions libfabric exports that loom calls (everything else
// in the API is an inline call through the provider's operation tables). Each definition
// forwards to the real function, looked up in libfabric.so.1 (LOOM_OFI_LIBRARY) when one of
// them is first called. When the library cannot be loaded, fi_getinfo() fails with -FI_ENOSYS
// and fabric_library_error() says why, which the transport's "ofi unavailable" WARN reports.
//
// The definitions are hidden: they bind loom's own calls only and never interpose on the
// symbols of a libfabric the application loads itself (dlopen() then returns that same copy).
#include "transports/ofi/fabric_loader.hpp"

#include <dlfcn.h>
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#include <string>

#include "config/config.hpp"

namespace loom::transport::ofi {
namespace {

struct FabricLibrary {
  decltype(&::fi_getinfo) getinfo = nullptr;
  decltype(&::fi_freeinfo) freeinfo = nullptr;
  decltype(&::fi_dupinfo) dupinfo = nullptr;
  decltype(&::fi_fabric) fabric = nullptr;
  decltype(&::fi_strerror) strerror = nullptr;
  decltype(&::fi_version) version = nullptr;
  std::string error;  // why loading failed; empty when every symbol was found
};

template <typename Fn>
bool find(void* handle, const char* name, Fn& out, std::string& error) {
  out = reinterpret_cast<Fn>(::dlsym(handle, name));
  if (out == nullptr && error.empty()) error = std::string("the library has no ") + name;
  return out != nullptr;
}

FabricLibrary load() {
  FabricLibrary lib;
  std::string name = "libfabric.so.1";
  if (auto cfg = config::Config::load(); cfg.is_ok()) name = cfg->get_string("LOOM_OFI_LIBRARY");
  // Never unloaded: providers keep threads and state for the process lifetime.
  void* handle = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    lib.error = why != nullptr ? why : "dlopen(" + name + ") failed";
    return lib;
  }
  bool ok = find(handle, "fi_getinfo", lib.getinfo, lib.error);
  ok = find(handle, "fi_freeinfo", lib.freeinfo, lib.error) && ok;
  ok = find(handle, "fi_dupinfo", lib.dupinfo, lib.error) && ok;
  ok = find(handle, "fi_fabric", lib.fabric, lib.error) && ok;
  ok = find(handle, "fi_strerror", lib.strerror, lib.error) && ok;
  ok = find(handle, "fi_version", lib.version, lib.error) && ok;
  if (!ok) lib = FabricLibrary{.error = lib.error};
  return lib;
}

const FabricLibrary& library() {
  static const FabricLibrary lib = load();
  return lib;
}

}  // namespace

bool fabric_library_loaded() {
  return library().error.empty();
}

std::string fabric_library_error() {
  return library().error;
}

}  // namespace loom::transport::ofi

using loom::transport::ofi::library;

extern "C" {

__attribute__((visibility("hidden"))) int fi_getinfo(uint32_t version, const char* node,
                                                     const char* service, uint64_t flags,
                                                     const struct fi_info* hints,
                                                     struct fi_info** info) {
  const auto& lib = library();
  if (lib.getinfo == nullptr) return -FI_ENOSYS;
  return lib.getinfo(version, node, service, flags, hints, info);
}

__attribute__((visibility("hidden"))) void fi_freeinfo(struct fi_info* info) {
  const auto& lib = library();
  if (lib.freeinfo != nullptr) lib.freeinfo(info);
}

__attribute__((visibility("hidden"))) struct fi_info* fi_dupinfo(const struct fi_info* info) {
  const auto& lib = library();
  return lib.dupinfo != nullptr ? lib.dupinfo(info) : nullptr;
}

__attribute__((visibility("hidden"))) int fi_fabric(struct fi_fabric_attr* attr,
                                                    struct fid_fabric** fabric, void* context) {
  const auto& lib = library();
  if (lib.fabric == nullptr) return -FI_ENOSYS;
  return lib.fabric(attr, fabric, context);
}

__attribute__((visibility("hidden"))) const char* fi_strerror(int errnum) {
  const auto& lib = library();
  return lib.strerror != nullptr ? lib.strerror(errnum) : "libfabric is not loaded";
}

__attribute__((visibility("hidden"))) uint32_t fi_version() {
  const auto& lib = library();
  return lib.version != nullptr ? lib.version() : 0;
}

}  // extern "C"
