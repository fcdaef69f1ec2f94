// The transport registry (transports/registry.hpp): every built-in kind has a factory, a kind
// without one is an error naming it, the hooks around creation (settings check, prepare and
// complete, cleanup, probe, cost facts) reach the right transport, and PeerTransports creates
// what its peers use through it.
#include <catch2/catch.hpp>

#include "bootstrap/memory_store.hpp"
#include "core/peer_transports.hpp"
#include "transports/ofi/ofi_fabric.hpp"
#include "transports/registry.hpp"
#include "transports/shm/shm_factory.hpp"
#include "transports/tcp/tcp_factory.hpp"

namespace tp = loom::transport;
using Catch::Matchers::Contains;
using tp::TransportKind;

namespace {

constexpr TransportKind kKinds[] = {TransportKind::Shm, TransportKind::Tcp, TransportKind::Ofi,
                                    TransportKind::CudaIpc};

using Settings = std::map<std::string, std::string>;

loom::config::Config load(const Settings& settings) {
  auto cfg = loom::config::Config::load(settings);
  INFO(cfg.status().message());
  REQUIRE(cfg.is_ok());
  return std::move(cfg).value();
}

struct Context {
  loom::config::Config cfg;
  tp::CreateContext ctx;

  explicit Context(const Settings& settings = {}) : cfg(load(settings)) {
    ctx.rank = 0;
    ctx.nranks = 2;
    ctx.comm_id = 0x7e6157;
    ctx.store = std::make_shared<loom::bootstrap::InMemoryStore>();
    ctx.config = &cfg;
    ctx.data_address = loom::net::resolve("127.0.0.1:0").value();
  }
};

}  // namespace

TEST_CASE("transport registry: names and kinds round-trip", "[transports][registry]") {
  for (TransportKind k : kKinds) {
    auto back = tp::kind_named(tp::to_string(k));
    REQUIRE(back.has_value());
    CHECK(*back == k);
  }
  CHECK(tp::kind_named("cuda_ipc") == TransportKind::CudaIpc);  // device buffers only
  CHECK_FALSE(tp::kind_named("efa").has_value());
}

TEST_CASE("transport registry: a kind without a factory is an error naming it",
          "[transports][registry]") {
  Context c;
  tp::Registry empty;
  for (TransportKind k : kKinds) {
    CHECK_FALSE(empty.has(k));
    auto t = empty.create(k, c.ctx);
    REQUIRE_FALSE(t.is_ok());
    CHECK_THAT(t.status().message(),
               Contains(std::string(tp::to_string(k))) && Contains("no factory"));
  }
  tp::Registry twice;
  REQUIRE(tp::register_builtin_transports(twice).is_ok());
  auto again = tp::register_builtin_transports(twice);
  REQUIRE_FALSE(again.is_ok());
  CHECK_THAT(again.message(), Contains("shm") && Contains("twice"));
}

TEST_CASE("transport registry: every built-in kind is registered", "[transports][registry]") {
  for (TransportKind k : kKinds) CHECK(tp::builtin_transports().has(k));
}

TEST_CASE("transport registry: creating yields a transport of that name",
          "[transports][registry]") {
  Context c;
  for (TransportKind k : {TransportKind::Shm, TransportKind::Tcp}) {
    auto t = tp::builtin_transports().create(k, c.ctx);
    REQUIRE(t.is_ok());
    CHECK((*t)->name() == tp::to_string(k));
  }
  // ofi needs a libfabric provider; Debian's libfabric1 ships tcp;ofi_rxm.
  if (!tp::ofi::probe_provider({"tcp;ofi_rxm", "127.0.0.1"}).is_ok()) {
    WARN("libfabric provider tcp;ofi_rxm is not available: ofi creation skipped");
    return;
  }
  Context o(Settings{{"LOOM_OFI_PROVIDER", "tcp;ofi_rxm"}});
  auto t = tp::builtin_transports().create(TransportKind::Ofi, o.ctx);
  REQUIRE(t.is_ok());
  CHECK((*t)->name() == "ofi");
}

TEST_CASE("transport registry: a factory's settings are checked", "[transports][registry]") {
  // The settings registry already rejects these out of range; the tcp factory checks again
  // for options that do not come from it.
  tp::tcp::TcpOptions o;
  o.sockets_per_peer = 17;
  CHECK_THAT(tp::tcp::check_options(o).message(), Contains("LOOM_SOCKETS_PER_PEER=17"));
  o.sockets_per_peer = 2;
  o.hello_timeout = std::chrono::milliseconds(50);
  CHECK_THAT(tp::tcp::check_options(o).message(), Contains("LOOM_HELLO_TIMEOUT=50 ms"));
  o.hello_timeout = std::chrono::seconds(5);
  CHECK(tp::tcp::check_options(o).is_ok());
}

TEST_CASE("transport registry: shm resolves its automatic policy from the CPU loads",
          "[transports][registry][shm]") {
  tp::shm::ShmOptions autos;
  autos.single_copy_min = 0;
  autos.slot_order = tp::shm::SlotOrder::Auto;
  autos.single_copy_max = {0, 0};
  auto own = tp::shm::resolve_auto(autos, 1.0, 1.0);
  CHECK(own.single_copy_min == std::size_t{64} << 10);
  CHECK(own.single_copy_max.any == autos.slot_bytes);
  CHECK(own.single_copy_max.exchange == autos.slot_bytes);
  CHECK(own.slot_order == tp::shm::SlotOrder::Rotate);
  auto shared = tp::shm::resolve_auto(autos, 2.0, 3.0);
  CHECK(shared.single_copy_min == std::size_t{32} << 10);
  CHECK(shared.single_copy_max.any == autos.slot_bytes);
  CHECK(shared.single_copy_max.exchange == tp::shm::kNoLimit);
  CHECK(shared.slot_order == tp::shm::SlotOrder::Reuse);
  tp::shm::ShmOptions set;
  set.single_copy_min = 4096;
  set.single_copy_max = {8192, 8192};
  set.slot_order = tp::shm::SlotOrder::Rotate;
  auto kept = tp::shm::resolve_auto(set, 4.0, 4.0);
  CHECK(kept.single_copy_min == 4096);
  CHECK(kept.single_copy_max.any == 8192);
  CHECK(kept.single_copy_max.exchange == 8192);
  CHECK(kept.slot_order == tp::shm::SlotOrder::Rotate);
}

TEST_CASE("transport registry: PeerTransports creates what its peers use, through the registry",
          "[transports][registry]") {
  using loom::detail::PeerTransports;
  Context c;
  tp::Registry tcp_only;
  REQUIRE(tcp_only.add(TransportKind::Tcp, &tp::tcp::make_transport).is_ok());
  // Peer 1 over tcp: created through the registry; shm and ofi unused, not created.
  auto p = PeerTransports::create(c.ctx, {TransportKind::Tcp, TransportKind::Tcp}, {}, tcp_only);
  REQUIRE(p.is_ok());
  REQUIRE((*p)->transport(TransportKind::Tcp) != nullptr);
  CHECK((*p)->transport(TransportKind::Tcp)->name() == "tcp");
  CHECK((*p)->transport(TransportKind::Shm) == nullptr);
  CHECK((*p)->transport(TransportKind::Ofi) == nullptr);
  // Peer 1 over shm, which this registry lacks: an error naming shm and the rank.
  auto missing =
      PeerTransports::create(c.ctx, {TransportKind::Tcp, TransportKind::Shm}, {}, tcp_only);
  REQUIRE_FALSE(missing.is_ok());
  CHECK_THAT(missing.status().message(), Contains("rank 0") && Contains("shm"));
  // A transport made beforehand (the tcp listener) is kept, not created again.
  auto made = tp::builtin_transports().create(TransportKind::Tcp, c.ctx);
  REQUIRE(made.is_ok());
  tp::Transport* before = made->get();
  std::vector<std::unique_ptr<tp::Transport>> list;
  list.push_back(std::move(made).value());
  tp::Registry empty;
  auto kept = PeerTransports::create(c.ctx, {TransportKind::Tcp, TransportKind::Tcp},
                                     std::move(list), empty);
  REQUIRE(kept.is_ok());
  CHECK((*kept)->transport(TransportKind::Tcp) == before);
}

TEST_CASE("transport registry: each transport checks its own settings, naming the bad one",
          "[transports][registry]") {
  const auto& r = tp::builtin_transports();
  CHECK(r.check_settings(load({})).is_ok());
  auto shm = r.check_settings(load({{"LOOM_SHM_SINGLE_COPY_MIN", "lots"}}));
  REQUIRE_FALSE(shm.is_ok());
  CHECK_THAT(shm.message(), Contains("LOOM_SHM_SINGLE_COPY_MIN"));
  // A registry without shm does not check shm's settings.
  tp::Registry tcp_only;
  REQUIRE(tcp_only.add(TransportKind::Tcp, tp::tcp::registry_entry()).is_ok());
  CHECK(tcp_only.check_settings(load({{"LOOM_SHM_SINGLE_COPY_MIN", "lots"}})).is_ok());
}

TEST_CASE("transport registry: tcp opens before the layout is known and is completed after",
          "[transports][registry][tcp]") {
  Context c;
  auto prepared = tp::builtin_transports().prepare(c.ctx);
  REQUIRE(prepared.is_ok());
  REQUIRE(prepared->size() == 1);  // tcp only: the others publish their own cards
  tp::Transport& tcp = *prepared->front();
  CHECK(tcp.name() == "tcp");
  auto card = tcp.card_address();
  REQUIRE(card.has_value());
  CHECK(card->port() != 0);  // listening: an ephemeral port was bound
  c.ctx.ranks_on_host = 2;
  c.ctx.peer_addresses = {*card, *card};
  CHECK(tp::builtin_transports().complete(tcp, c.ctx).is_ok());
  auto* concrete = dynamic_cast<tp::tcp::TcpTransport*>(&tcp);
  REQUIRE(concrete != nullptr);
  // Completing asks the kind of the transport given, never another's hook.
  tp::Registry shm_only;
  REQUIRE(shm_only.add(TransportKind::Shm, tp::shm::registry_entry()).is_ok());
  auto wrong = shm_only.complete(tcp, c.ctx);
  REQUIRE_FALSE(wrong.is_ok());
  CHECK_THAT(wrong.message(), Contains("tcp") && Contains("not registered"));
}

TEST_CASE(
    "transport registry: shm asks for buffered ring sends only with auto single copy on "
    "shared CPUs",
    "[transports][registry][shm]") {
  tp::shm::ShmOptions autos;
  autos.single_copy_min = 0;  // auto, as parsed
  CHECK(tp::shm::buffered_ring_sends(autos, 1.5));
  CHECK_FALSE(tp::shm::buffered_ring_sends(autos, 1.0));
  tp::shm::ShmOptions set;
  set.single_copy_min = 4096;
  CHECK_FALSE(tp::shm::buffered_ring_sends(set, 4.0));
  // Through the registry: the created transport carries the hint.
  Context c;
  c.ctx.host_cpu_load = 2;
  auto t = tp::builtin_transports().create(TransportKind::Shm, c.ctx);
  REQUIRE(t.is_ok());
  CHECK((*t)->plan_hints().buffered_ring_sends);
  Context own;
  auto u = tp::builtin_transports().create(TransportKind::Shm, own.ctx);
  REQUIRE(u.is_ok());
  CHECK_FALSE((*u)->plan_hints().buffered_ring_sends);
  // tcp asks nothing of the plans.
  auto tcp = tp::builtin_transports().create(TransportKind::Tcp, c.ctx);
  REQUIRE(tcp.is_ok());
  CHECK_FALSE((*tcp)->plan_hints().buffered_ring_sends);
  // The communicator's view (PeerTransports, which CommImpl copies into its plan settings):
  // shm's ask holds when a peer uses shm, and nothing is asked when none does.
  using loom::detail::PeerTransports;
  auto with_shm = PeerTransports::create(c.ctx, {TransportKind::Tcp, TransportKind::Shm}, {});
  REQUIRE(with_shm.is_ok());
  CHECK((*with_shm)->plan_hints().buffered_ring_sends);
  auto tcp_only = PeerTransports::create(c.ctx, {TransportKind::Tcp, TransportKind::Tcp}, {});
  REQUIRE(tcp_only.is_ok());
  CHECK_FALSE((*tcp_only)->plan_hints().buffered_ring_sends);
}

TEST_CASE("transport registry: shm states its policy to the cost model", "[transports][registry]") {
  const auto& r = tp::builtin_transports();
  auto autos = r.cost_facts(TransportKind::Shm, load({}));
  REQUIRE(autos.is_ok());
  CHECK(autos->single_copy_min == 0);
  CHECK(autos->auto_single_copy_min == 65536);
  CHECK(autos->auto_shared_cpu_single_copy_min == 32768);
  CHECK(autos->reuse_slots_above == 2);
  auto set = r.cost_facts(TransportKind::Shm, load({{"LOOM_SHM_SINGLE_COPY_MIN", "8K"}}));
  REQUIRE(set.is_ok());
  CHECK(set->single_copy_min == 8192);
  auto off = r.cost_facts(TransportKind::Shm, load({{"LOOM_SHM_SINGLE_COPY", "off"}}));
  REQUIRE(off.is_ok());
  CHECK(off->single_copy_min > 1e20);
  // tcp states nothing.
  auto tcp = r.cost_facts(TransportKind::Tcp, load({}));
  REQUIRE(tcp.is_ok());
  CHECK(tcp->auto_single_copy_min == 0);
}

TEST_CASE("transport registry: ofi's probe says why it cannot run", "[transports][registry][ofi]") {
  const auto& r = tp::builtin_transports();
  const auto addr = loom::net::resolve("127.0.0.1:0").value();
  // Transports without a probe can always run.
  CHECK(r.probe(TransportKind::Tcp, load({}), addr, false).available);
  auto none =
      r.probe(TransportKind::Ofi, load({{"LOOM_OFI_PROVIDER", "no-such-provider"}}), addr, true);
  CHECK_FALSE(none.available);
  CHECK_THAT(none.why_missing, Contains("no-such-provider"));
  if (!tp::ofi::efa_device_present()) {  // unrequested without EFA: no fi_getinfo at all
    const auto calls = tp::ofi::getinfo_calls();
    auto skipped = r.probe(TransportKind::Ofi, load({}), addr, false);
    CHECK_FALSE(skipped.available);
    CHECK_THAT(skipped.why_missing, Contains("no EFA device"));
    CHECK(tp::ofi::getinfo_calls() == calls);
  }
}

TEST_CASE("transport registry: cuda_ipc is registered and needs a device runtime",
          "[transports][registry][cuda_ipc]") {
  Context c;
  c.ctx.host_ids = {"host-a", "host-a"};
  auto t = tp::builtin_transports().create(TransportKind::CudaIpc, c.ctx);  // ctx.device unset
  REQUIRE_FALSE(t.is_ok());
  CHECK_THAT(t.status().message(), Contains("rank 0") && Contains("device runtime"));
  // Ordinary peers are never routed to it: PeerTransports leaves its slot empty.
  auto p =
      loom::detail::PeerTransports::create(c.ctx, {TransportKind::Tcp, TransportKind::Tcp}, {});
  REQUIRE(p.is_ok());
  CHECK((*p)->transport(TransportKind::CudaIpc) == nullptr);
}
