#include "device/net_buffers.hpp"

#include <fmt/format.h>

namespace loom::device {

std::string_view to_string(NetBufferAction a) noexcept {
  switch (a) {
    case NetBufferAction::RegisterHost: return "register host memory";
    case NetBufferAction::RegisterDevice: return "register device memory (FI_HMEM_CUDA)";
    case NetBufferAction::StageThroughHost: return "stage through pinned host memory";
  }
  return "?";
}

NetBufferDecision decide_net_buffer(MemoryKind kind, std::string_view runtime,
                                    std::string_view provider, bool provider_hmem, bool simulate) {
  if (kind == MemoryKind::Host) return {NetBufferAction::RegisterHost, "host buffer"};
  const bool simulated = simulate && runtime == "host-sim";
  if (runtime != "cuda" && !simulated)
    return {
        NetBufferAction::StageThroughHost,
        fmt::format("device runtime {} has no memory a NIC can register as FI_HMEM_CUDA", runtime)};
  if (!provider_hmem)
    return {NetBufferAction::StageThroughHost,
            fmt::format("libfabric provider {} does not offer FI_HMEM", provider)};
  if (simulated)
    return {NetBufferAction::RegisterDevice,
            fmt::format("simulated (LOOM_OFI_HMEM=simulate): host-sim device memory registered "
                        "with libfabric provider {} as FI_HMEM_SYSTEM",
                        provider)};
  return {NetBufferAction::RegisterDevice,
          fmt::format("libfabric provider {} offers FI_HMEM: the NIC reads and writes GPU memory "
                      "directly (GPUDirect RDMA)",
                      provider)};
}

}  // namespace loom::device
