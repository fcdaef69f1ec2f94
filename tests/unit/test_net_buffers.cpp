// The FI_HMEM decision (src/device/net_buffers.hpp): every combination of buffer kind, device
// runtime and provider capability.
#include <catch2/catch.hpp>

#include "device/net_buffers.hpp"

using namespace loom::device;
using Catch::Matchers::Contains;

TEST_CASE("FI_HMEM decision: device buffers are registered only with CUDA and an FI_HMEM provider",
          "[device][ofi]") {
  for (bool hmem : {false, true})
    for (std::string_view rt : {"cuda", "host-sim"}) {
      INFO(rt << " hmem " << hmem);
      CHECK(decide_net_buffer(MemoryKind::Host, rt, "efa", hmem).action ==
            NetBufferAction::RegisterHost);
      auto d = decide_net_buffer(MemoryKind::Device, rt, "efa", hmem);
      const bool direct = hmem && rt == "cuda";
      CHECK(d.action ==
            (direct ? NetBufferAction::RegisterDevice : NetBufferAction::StageThroughHost));
      CHECK_FALSE(d.reason.empty());
    }
  auto no = decide_net_buffer(MemoryKind::Device, "cuda", "tcp;ofi_rxm", false);
  CHECK_THAT(no.reason, Contains("tcp;ofi_rxm") && Contains("FI_HMEM"));
  auto yes = decide_net_buffer(MemoryKind::Device, "cuda", "efa", true);
  CHECK_THAT(yes.reason, Contains("efa") && Contains("GPUDirect"));
  CHECK(to_string(NetBufferAction::RegisterDevice) == "register device memory (FI_HMEM_CUDA)");
}
