// LOOM_TRANSPORTS parsing and the per-peer transport decision.
#include <catch2/catch.hpp>

#include "core/transport_choice.hpp"

using namespace loom::detail;
using Catch::Matchers::Contains;

TEST_CASE("transport choice: LOOM_TRANSPORTS parsing", "[transports]") {
  using K = TransportKind;
  CHECK(parse_transport_list("").value() == std::vector<K>{K::Shm, K::Ofi, K::Tcp});
  CHECK(parse_transport_list("tcp").value() == std::vector<K>{K::Tcp});
  CHECK(parse_transport_list("tcp,shm").value() == std::vector<K>{K::Tcp, K::Shm});
  CHECK(parse_transport_list("^shm").value() == std::vector<K>{K::Ofi, K::Tcp});
  CHECK(parse_transport_list("ofi,shm").value() == std::vector<K>{K::Ofi, K::Shm});
  CHECK(parse_transport_list("shm,tcp,^tcp").value() == std::vector<K>{K::Shm});
  auto bad = parse_transport_list("efa");
  REQUIRE_FALSE(bad.is_ok());
  CHECK_THAT(bad.status().message(), Contains("efa"));
  CHECK(parse_transport_list("^shm,^tcp").value() == std::vector<K>{K::Ofi});
  CHECK_FALSE(parse_transport_list("^shm,^tcp,^ofi").is_ok());
}

TEST_CASE("transport choice: same host uses shm, other hosts tcp, both sides agree",
          "[transports]") {
  using K = TransportKind;
  std::vector<std::string> hosts = {"a", "a", "b", "b", "a"};
  std::vector<std::vector<K>> allowed(5, {K::Shm, K::Tcp});
  for (int r = 0; r < 5; ++r) {
    auto c = choose_transports(r, hosts, allowed).value();
    for (int p = 0; p < 5; ++p) {
      if (p == r) continue;
      CHECK(c[static_cast<std::size_t>(p)] == (hosts[r] == hosts[p] ? K::Shm : K::Tcp));
      auto other = choose_transports(p, hosts, allowed).value();
      CHECK(other[static_cast<std::size_t>(r)] == c[static_cast<std::size_t>(p)]);
    }
  }
}

TEST_CASE("transport choice: differing allow lists still agree or fail naming both",
          "[transports]") {
  using K = TransportKind;
  std::vector<std::string> hosts = {"a", "a", "a"};
  std::vector<std::vector<K>> allowed = {{K::Tcp, K::Shm}, {K::Shm, K::Tcp}, {K::Shm}};
  auto c0 = choose_transports(0, hosts, allowed).value();
  auto c1 = choose_transports(1, hosts, allowed).value();
  CHECK(c0[1] == K::Tcp);  // the lower rank's preference wins
  CHECK(c1[0] == K::Tcp);
  CHECK(c1[2] == K::Shm);
  std::vector<std::string> split = {"a", "b"};
  auto none = choose_transports(0, split, {{K::Shm}, {K::Shm}});
  REQUIRE_FALSE(none.is_ok());
  CHECK_THAT(none.status().message(), Contains("rank 0") && Contains("rank 1"));
}

TEST_CASE("transport choice: any_pair_uses matches the per-pair choices", "[transports]") {
  using K = TransportKind;
  // Brute force over every pair of choose_transports' answers.
  auto brute = [](K kind, const std::vector<std::string>& hosts,
                  const std::vector<std::vector<K>>& allowed) {
    for (int r = 0; r < static_cast<int>(hosts.size()); ++r) {
      auto c = choose_transports(r, hosts, allowed).value();
      for (int p = 0; p < static_cast<int>(hosts.size()); ++p)
        if (p != r && c[static_cast<std::size_t>(p)] == kind) return true;
    }
    return false;
  };
  struct Case {
    std::vector<std::string> hosts;
    std::vector<std::vector<K>> allowed;
    bool ofi;
  };
  const std::vector<Case> cases = {
      {{"a", "a", "a"},
       {{K::Shm, K::Ofi, K::Tcp}, {K::Shm, K::Ofi, K::Tcp}, {K::Shm, K::Ofi, K::Tcp}},
       false},  // one host: shm everywhere
      {{"a", "b"}, {{K::Shm, K::Ofi, K::Tcp}, {K::Shm, K::Ofi, K::Tcp}}, true},
      {{"a", "b"}, {{K::Shm, K::Tcp}, {K::Shm, K::Ofi, K::Tcp}}, false},  // rank 0 has no ofi
      {{"a", "a"}, {{K::Ofi}, {K::Ofi, K::Shm}}, true},  // ofi named first on one host
      {{"a", "a", "b"}, {{K::Tcp, K::Ofi}, {K::Ofi}, {K::Ofi}}, true},
      {{"a", "a"}, {{K::Tcp}, {K::Tcp}}, false},
      {{"a"}, {{K::Ofi}}, false},  // one rank: no pair at all
  };
  for (const Case& c : cases) {
    CHECK(any_pair_uses(K::Ofi, c.hosts, c.allowed) == c.ofi);
    CHECK(brute(K::Ofi, c.hosts, c.allowed) == c.ofi);
    CHECK(any_pair_uses(K::Shm, c.hosts, c.allowed) == brute(K::Shm, c.hosts, c.allowed));
    CHECK(any_pair_uses(K::Tcp, c.hosts, c.allowed) == brute(K::Tcp, c.hosts, c.allowed));
  }
}

TEST_CASE("transport choice: ofi is resolved against what libfabric offers", "[transports]") {
  using K = TransportKind;
  OfiAvailability efa{true, true, "efa", ""};
  OfiAvailability rxm{true, false, "tcp;ofi_rxm", "no efa; using tcp;ofi_rxm instead"};
  OfiAvailability none{false, false, "", "libfabric provider 'efa' is not available"};
  // Default list: ofi only on EFA; elsewhere tcp, quietly.
  CHECK(resolve_transport_list(0, "", false, true, efa).value() ==
        std::vector<K>{K::Shm, K::Ofi, K::Tcp});
  CHECK(resolve_transport_list(0, "", false, true, rxm).value() == std::vector<K>{K::Shm, K::Tcp});
  CHECK(resolve_transport_list(0, "", false, true, none).value() == std::vector<K>{K::Shm, K::Tcp});
  // Asked for: kept on any provider; missing -> tcp, or an error naming why when forbidden.
  CHECK(resolve_transport_list(0, "ofi", true, true, rxm).value() == std::vector<K>{K::Ofi});
  CHECK(resolve_transport_list(0, "ofi", true, true, none).value() == std::vector<K>{K::Tcp});
  CHECK(resolve_transport_list(0, "ofi,shm", true, true, none).value() ==
        std::vector<K>{K::Shm, K::Tcp});
  auto err = resolve_transport_list(3, "ofi", true, false, none);
  REQUIRE_FALSE(err.is_ok());
  CHECK_THAT(err.status().message(), Contains("rank 3") && Contains("'efa' is not available") &&
                                         Contains("LOOM_OFI_FALLBACK"));
  // Excluded: no probing matters.
  CHECK(resolve_transport_list(0, "^ofi", false, false, none).value() ==
        std::vector<K>{K::Shm, K::Tcp});
  // Cross-host peers pick ofi when both allow it, tcp when one fell back.
  std::vector<std::string> hosts = {"a", "b"};
  CHECK(choose_transports(0, hosts, {{K::Shm, K::Ofi, K::Tcp}, {K::Shm, K::Ofi, K::Tcp}})
            .value()[1] == K::Ofi);
  CHECK(choose_transports(1, hosts, {{K::Shm, K::Ofi, K::Tcp}, {K::Shm, K::Tcp}}).value()[0] ==
        K::Tcp);
}
