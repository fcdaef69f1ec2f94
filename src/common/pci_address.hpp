// PCI addresses in one form, shared by the topology (hwloc, LOOM_PCI_TOPO_FILE) and the device
// runtimes (CUDA, NVML).
#pragma once

#include <string>
#include <string_view>

namespace loom {

/// A PCI address in one form, "0000:3b:00.0", whatever the source wrote ("00000000:3B:00.0"
/// from NVML, "0000:3b:00.0" from CUDA or hwloc); "" when `text` is not
/// domain:bus:device.function.
std::string canonical_bus_id(std::string_view text);

}  // namespace loom
