// The FI_HMEM decision (src/device/net_buffers.hpp): every combination of buffer kind, device
// runtime and provider capability.
#include <catch2/catch.hpp>

#include "common/status.hpp"
#include "device/net_buffers.hpp"
#include "transports/ofi/mr_cache.hpp"
#include "transports/ofi/ofi_fabric.hpp"

using namespace loom::device;
using Catch::Matchers::Contains;
using loom::value_or_throw;

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

TEST_CASE("FI_HMEM decision: LOOM_OFI_HMEM=simulate registers host-sim device memory",
          "[device][ofi]") {
  auto sim = decide_net_buffer(MemoryKind::Device, "host-sim", "shm", true, true);
  CHECK(sim.action == NetBufferAction::RegisterDevice);
  CHECK_THAT(sim.reason, Contains("simulate") && Contains("FI_HMEM_SYSTEM"));
  // Simulation needs the provider's FI_HMEM all the same, and changes nothing for CUDA.
  CHECK(decide_net_buffer(MemoryKind::Device, "host-sim", "tcp;ofi_rxm", false, true).action ==
        NetBufferAction::StageThroughHost);
  CHECK(decide_net_buffer(MemoryKind::Device, "cuda", "efa", true, true).action ==
        NetBufferAction::RegisterDevice);
  CHECK(decide_net_buffer(MemoryKind::Host, "host-sim", "shm", true, true).action ==
        NetBufferAction::RegisterHost);
}

TEST_CASE("registration cache: device memory is registered whole and keyed by allocation id",
          "[ofi]") {
  namespace ofi = loom::transport::ofi;
  auto fabric = ofi::Fabric::open({"shm", ""});
  if (!fabric.is_ok()) {
    WARN("libfabric's shm provider is not available: skipped (" << fabric.status().message()
                                                                << ")");
    return;
  }
  ofi::MrCache cache((*fabric)->domain(), /*enabled=*/false);
  std::vector<std::uint8_t> buf(1 << 16);
  const ofi::HmemDevice kind{FI_HMEM_SYSTEM, 0};
  // Registration off for host memory: nothing registered.
  CHECK(value_or_throw(cache.desc(buf.data(), 100)) == nullptr);
  CHECK(cache.registrations() == 0);
  // Device memory is registered whatever the mode says, as a whole allocation.
  REQUIRE(cache.device_desc(buf.data(), buf.size(), kind, 7).is_ok());
  CHECK(cache.registrations() == 1);
  REQUIRE(cache.device_desc(buf.data(), buf.size(), kind, 7).is_ok());  // the same buffer
  CHECK(cache.registrations() == 1);
  CHECK(cache.hits() == 1);
  // Freed and reallocated at the same address: a new id, a new registration, the old released.
  REQUIRE(cache.device_desc(buf.data(), buf.size() / 2, kind, 8).is_ok());
  CHECK(cache.registrations() == 2);
  CHECK(cache.stale() == 1);
  CHECK(cache.size() == 1);
  // A probe registers and releases at once.
  REQUIRE(cache.probe(buf.data(), 4096, kind).is_ok());
  CHECK(cache.registrations() == 3);
  CHECK(cache.size() == 1);
}
