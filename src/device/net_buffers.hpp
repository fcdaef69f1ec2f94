// How a buffer handed to a network transport (ofi) is made visible to the NIC: registered where
// it lives (host memory; device memory through FI_HMEM, GPUDirect RDMA on EFA) or staged through
// pinned host memory. A pure decision, so it is tested on the host for every case.
// The communicator takes it per rank at init (core/device_network.*), and device buffers cross
// hosts from GPU memory only when every rank's answer is RegisterDevice.
#pragma once

#include <string>
#include <string_view>

#include "device/device.hpp"

namespace loom::device {

enum class NetBufferAction : std::uint8_t {
  RegisterHost,    // host memory: FI_HMEM_SYSTEM (when the provider asks for registration)
  RegisterDevice,  // device memory registered with FI_HMEM_CUDA: the NIC reads the GPU
  StageThroughHost,
};
std::string_view to_string(NetBufferAction a) noexcept;

struct NetBufferDecision {
  NetBufferAction action = NetBufferAction::RegisterHost;
  std::string reason;  // for the INFO log of the choice
};

/// `runtime` is the device runtime's name ("cuda", "host-sim"); `provider` the libfabric
/// provider and `provider_hmem` whether it reported FI_HMEM (OfiFabric::info().hmem).
/// `simulate` (LOOM_OFI_HMEM=simulate) lets host-sim device memory be registered (as
/// FI_HMEM_SYSTEM), so the path runs without a GPU.
NetBufferDecision decide_net_buffer(MemoryKind kind, std::string_view runtime,
                                    std::string_view provider, bool provider_hmem,
                                    bool simulate = false);

}  // namespace loom::device
