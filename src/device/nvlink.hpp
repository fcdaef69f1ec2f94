// What joins two GPUs, told from NVML's NVLink table: "nvlink x<N>" (N links straight to the
// peer), "nvlink (nvswitch)" (both GPUs on an NVSwitch fabric) or "pcie". NVML's library
// (libnvidia-ml.so.1) ships with the GPU driver and is loaded at run time, so the library
// still loads on hosts without a driver; its header comes from PyPI's nvidia-nvml-dev-cu12
// (Debian packages none) and the reader is built only when CMake found it (LOOM_HAVE_NVML).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/pci_address.hpp"
#include "common/status.hpp"

namespace loom::device {

/// One NVLink of a GPU as NVML reports it.
struct NvLink {
  bool active = false;
  std::string remote_bus_id;  // canonical form (canonical_bus_id)
  bool remote_is_switch = false;
};

using loom::canonical_bus_id;  // common/pci_address.hpp

/// The label for the link from GPU `a` to GPU `b` given both GPUs' NVLinks.
std::string classify_link(const std::vector<NvLink>& links_of_a, std::string_view bus_id_of_b,
                          const std::vector<NvLink>& links_of_b);

/// Reads the NVLinks of the GPU at PCI address `bus_id` through NVML loaded from `library`
/// (LOOM_NVML_LIBRARY). Errors say why (no NVML in this build, library not found, NVML
/// failed), so the caller can label the link "unknown (<why>)".
Result<std::vector<NvLink>> nvml_links(std::string_view library, std::string_view bus_id);

}  // namespace loom::device
