// Whether device buffers cross hosts straight from GPU memory (over ofi with FI_HMEM, GPUDirect
// RDMA on EFA) or through pinned host staging. Each rank says what it can do; the ranks agree
// through the bootstrap store, so all of them take the same path (docs/gpu.md, "FI_HMEM").
#pragma once

#include <string>
#include <vector>

#include "bootstrap/store.hpp"
#include "core/peer_transports.hpp"
#include "device/device.hpp"

namespace loom::detail {

/// LOOM_OFI_HMEM.
enum class OfiHmemMode : std::uint8_t { Auto, Off, Simulate };
Result<OfiHmemMode> parse_ofi_hmem(std::string_view text);

struct NetDeviceVote {
  bool can = false;
  std::string why;  // for the INFO log: what allows it, or what stops it
};

/// This rank's answer, for a communicator whose ranks span hosts (`host_ids` by rank): it can
/// when every peer on another host is reached over ofi, the provider registers device memory
/// (device::decide_net_buffer), the runtime tells allocations apart, and a probe registration
/// of device memory succeeds. When it can, device memory is enabled on the ofi transport.
NetDeviceVote vote_network_device(device::Device& dev, PeerTransports& transports,
                                  const std::vector<std::string>& host_ids, int rank,
                                  OfiHmemMode mode);

/// Every rank's vote through the store (collective). True when every rank can; otherwise logs
/// at INFO the first rank that cannot and why.
Result<bool> agree_network_device(bootstrap::Store& store, const std::string& prefix, int rank,
                                  int nranks, const NetDeviceVote& mine, Deadline deadline);

}  // namespace loom::detail
