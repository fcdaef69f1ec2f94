// libfabric is loaded on first use (see fabric_loader.cpp): these say whether that worked.
#pragma once

#include <string>

namespace loom::transport::ofi {

/// Loads libfabric.so.1 if not done yet; true when every function loom needs was found.
bool fabric_library_loaded();
/// Why libfabric could not be loaded (dlopen/dlsym error), or empty.
std::string fabric_library_error();

}  // namespace loom::transport::ofi
