// The transport registry (transports/registry.hpp): every built-in kind has a factory, a kind
// without one is an error naming it, and PeerTransports creates what its peers use through it.
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

constexpr TransportKind kKinds[] = {TransportKind::Shm, TransportKind::Tcp, TransportKind::Ofi};

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
  CHECK_FALSE(tp::kind_named("cuda_ipc").has_value());  // device buffers only
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
  auto own = tp::shm::resolve_auto(autos, 1.0, 1.0);
  CHECK(own.single_copy_min == std::size_t{64} << 10);
  CHECK(own.slot_order == tp::shm::SlotOrder::Rotate);
  auto shared = tp::shm::resolve_auto(autos, 2.0, 3.0);
  CHECK(shared.single_copy_min == std::size_t{32} << 10);
  CHECK(shared.slot_order == tp::shm::SlotOrder::Reuse);
  tp::shm::ShmOptions set;
  set.single_copy_min = 4096;
  set.slot_order = tp::shm::SlotOrder::Rotate;
  auto kept = tp::shm::resolve_auto(set, 4.0, 4.0);
  CHECK(kept.single_copy_min == 4096);
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
