// StripedConnection (transports/striped): how messages are split over rails and which rail each
// part takes, checked against fake rails that record what was posted; and the ofi transport's
// rails from LOOM_OFI_DOMAINS. (The conformance suite runs "ofi-rails:tcp;ofi_rxm" end to end;
// tests/process/netns_rails.sh runs real NICs.)
#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "bootstrap/memory_store.hpp"
#include "config/config.hpp"
#include "transports/ofi/ofi_fabric.hpp"
#include "transports/ofi/ofi_factory.hpp"
#include "transports/ofi/ofi_rails.hpp"
#include "transports/striped/striped_connection.hpp"

using Catch::Matchers::Contains;
using loom::ErrorCode;
using loom::Result;
using loom::Status;
namespace tp = loom::transport;

namespace {

// A rail that records every post and completes a request when told to.
class FakeRail final : public tp::Connection {
 public:
  struct Post {
    bool send = false;
    std::size_t off = 0;
    std::size_t len = 0;
  };
  std::vector<Post> posts;
  std::vector<bool> done;
  Status fail_tests;

  [[nodiscard]] tp::Caps caps() const override { return {}; }
  [[nodiscard]] int peer() const override { return 1; }
  [[nodiscard]] std::string name() const override { return "fake"; }
  Result<tp::Request> isend(const tp::MemRegion&, std::size_t off, std::size_t len,
                            const tp::Tag&) override {
    return add(true, off, len);
  }
  Result<tp::Request> irecv(const tp::MemRegion&, std::size_t off, std::size_t len,
                            const tp::Tag&) override {
    return add(false, off, len);
  }
  Result<bool> test(const tp::Request& r) override {
    if (!fail_tests.is_ok()) return fail_tests;
    return static_cast<bool>(done.at(r.id - 1));
  }
  bool prepare_wait(std::vector<pollfd>&) override { return true; }

 private:
  tp::Request add(bool send, std::size_t off, std::size_t len) {
    posts.push_back({send, off, len});
    done.push_back(false);
    return tp::Request{posts.size()};
  }
};

}  // namespace

TEST_CASE("striped connection: small messages alternate rails, large ones split across them",
          "[rails]") {
  FakeRail a, b, c;
  tp::StripedConnection s({&a, &b, &c}, 64u << 10);
  tp::MemRegion region;
  // Three small sends: rails 0, 1, 2 in turn, whole.
  for (int i = 0; i < 3; ++i) REQUIRE(s.isend(region, 100, 1000, {}).is_ok());
  CHECK(a.posts.size() == 1);
  CHECK(b.posts.size() == 1);
  CHECK(c.posts.size() == 1);
  CHECK(a.posts[0].off == 100);
  CHECK(a.posts[0].len == 1000);
  // 1 MiB + 5 (at least twice the threshold): 3 parts, one per rail, starting where the last
  // message left off (rail 0 again), 4 KiB-aligned parts and a shorter last one.
  const std::size_t len = (1u << 20) + 5;
  auto big = s.isend(region, 7, len, {});
  REQUIRE(big.is_ok());
  REQUIRE(a.posts.size() == 2);
  REQUIRE(b.posts.size() == 2);
  REQUIRE(c.posts.size() == 2);
  const std::size_t each = tp::stripe_part_len(len, 3);
  CHECK(each % tp::kStripeAlign == 0);
  CHECK(a.posts[1].off == 7);
  CHECK(a.posts[1].len == each);
  CHECK(b.posts[1].off == 7 + each);
  CHECK(c.posts[1].off == 7 + 2 * each);
  CHECK(a.posts[1].len + b.posts[1].len + c.posts[1].len == len);
  // Receives count separately: the first receive takes rail 0.
  REQUIRE(s.irecv(region, 0, 10, {}).is_ok());
  CHECK(a.posts.size() == 3);
  CHECK_FALSE(a.posts[2].send);
  // The striped send completes only once every part has.
  a.done[1] = true;
  b.done[1] = true;
  CHECK_FALSE(s.test(*big).value());
  c.done[1] = true;
  CHECK(s.test(*big).value());
}

TEST_CASE("striped connection: one failed part fails the connection for good", "[rails]") {
  FakeRail a, b;
  tp::StripedConnection s({&a, &b}, 0);  // never split: whole messages alternate
  tp::MemRegion region;
  auto first = s.irecv(region, 0, 8, {});
  REQUIRE(first.is_ok());
  a.fail_tests = Status(ErrorCode::Mismatch, "rank 1 expected x, rank 0 sent y");
  auto r = s.test(*first);
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == ErrorCode::Mismatch);
  // The next message would take rail 1, which is fine, but the connection stays failed.
  auto next = s.irecv(region, 0, 8, {});
  REQUIRE_FALSE(next.is_ok());
  CHECK(next.status().code() == ErrorCode::Mismatch);
  CHECK(b.posts.empty());
  CHECK_FALSE(s.caps().peeks);
}

TEST_CASE("ofi rails: a domain that does not exist fails creation, naming it", "[rails][ofi]") {
  if (!tp::ofi::probe_provider({"tcp;ofi_rxm", "127.0.0.1"}).is_ok()) {
    WARN("tcp;ofi_rxm is not available here");
    return;
  }
  auto cfg = loom::config::Config::load(
      {{"LOOM_OFI_PROVIDER", "tcp;ofi_rxm"}, {"LOOM_OFI_DOMAINS", "lo,nosuchnic9"}});
  REQUIRE(cfg.is_ok());
  tp::CreateContext ctx;
  ctx.config = &*cfg;
  ctx.nranks = 2;
  ctx.store = std::make_shared<loom::bootstrap::InMemoryStore>();
  ctx.data_address = loom::net::resolve("127.0.0.1:0").value();
  auto t = tp::ofi::make_transport(ctx);
  REQUIRE_FALSE(t.is_ok());
  CHECK_THAT(t.status().message(), Contains("rail 1") && Contains("nosuchnic9") &&
                                       Contains("LOOM_OFI_DOMAINS=lo,nosuchnic9"));
}

TEST_CASE("ofi rails: LOOM_OFI_DOMAINS=all lists a provider's domains but loopback",
          "[rails][ofi]") {
  if (!tp::ofi::probe_provider({"tcp;ofi_rxm", "127.0.0.1"}).is_ok()) {
    WARN("tcp;ofi_rxm is not available here");
    return;
  }
  const std::vector<std::string> all = tp::ofi::list_domains("tcp;ofi_rxm");
  CHECK(std::find(all.begin(), all.end(), "lo") == all.end());
  CHECK(std::is_sorted(all.begin(), all.end()));
  CHECK(tp::ofi::list_domains("no-such-provider").empty());
}

TEST_CASE("ofi rails: at most 8, each rank of a host from its own place", "[rails][ofi]") {
  std::vector<std::string> names;
  for (int i = 0; i < 32; ++i) names.push_back(fmt::format("rdmap{}s27-rdm", i));
  for (int rank = 0; rank < 5; ++rank) {
    INFO("rank " << rank);
    tp::NicSubset cut = tp::ofi::at_most_rails({names, "near"}, rank, 8);
    REQUIRE(cut.names.size() == 8);
    const std::size_t first = (static_cast<std::size_t>(rank) % 4) * 8;
    for (std::size_t i = 0; i < 8; ++i) CHECK(cut.names[i] == names[first + i]);
    CHECK_THAT(cut.why, Contains("near; 8 of the 32 from number " + std::to_string(first)));
  }
  // 12 NICs: windows wrap around the end.
  names.resize(12);
  tp::NicSubset wrapped = tp::ofi::at_most_rails({names, ""}, 1, 8);
  CHECK(wrapped.names.front() == names[8]);
  CHECK(wrapped.names.back() == names[3]);
  tp::NicSubset few = tp::ofi::at_most_rails({{"a", "b"}, "why"}, 3, 8);
  CHECK(few.names == std::vector<std::string>{"a", "b"});
  CHECK(few.why == "why");
}

TEST_CASE(
    "ofi rails: LOOM_OFI_DOMAINS=near:LIST opens the rails the topology picks, and says "
    "how many",
    "[rails][ofi]") {
  if (!tp::ofi::probe_provider({"tcp;ofi_rxm", "127.0.0.1"}).is_ok()) {
    WARN("tcp;ofi_rxm is not available here");
    return;
  }
  auto store = std::make_shared<loom::bootstrap::InMemoryStore>();
  auto make = [&](const std::string& domains, std::vector<std::string> pick) {
    auto cfg = loom::config::Config::load(
        {{"LOOM_OFI_PROVIDER", "tcp;ofi_rxm"}, {"LOOM_OFI_DOMAINS", domains}});
    REQUIRE(cfg.is_ok());
    tp::CreateContext ctx;
    ctx.config = &*cfg;
    ctx.nranks = 2;
    ctx.comm_id = 7;
    ctx.store = store;
    ctx.data_address = loom::net::resolve("127.0.0.1:0").value();
    std::vector<std::string> asked;
    ctx.nearest_nics = [&](const std::vector<std::string>& candidates) {
      asked = candidates;
      return tp::NicSubset{pick, "test"};
    };
    auto t = tp::ofi::make_transport(ctx);
    CHECK(asked == std::vector<std::string>{"lo", "nosuchnic9", "lo"});
    return t;
  };
  auto rails = [&] {
    auto b = store->get("loom/0000000000000007/ofi/rails/0", loom::Deadline::never());
    REQUIRE(b.is_ok());
    return std::string(b->begin(), b->end());
  };
  // The topology keeps one of three: one endpoint, not rails (the missing NIC is never opened).
  auto one = make("near:lo,nosuchnic9,lo", {"lo"});
  REQUIRE(one.is_ok());
  CHECK(dynamic_cast<tp::ofi::OfiRails*>(one->get()) == nullptr);
  CHECK(rails() == "1");
  one->reset();
  auto two = make("near:lo,nosuchnic9,lo", {"lo", "lo"});
  REQUIRE(two.is_ok());
  auto* striped = dynamic_cast<tp::ofi::OfiRails*>(two->get());
  REQUIRE(striped != nullptr);
  CHECK(striped->rails() == 2);
  CHECK(rails() == "2");
  two->reset();
  auto cfg = loom::config::Config::load(
      {{"LOOM_OFI_PROVIDER", "tcp;ofi_rxm"}, {"LOOM_OFI_DOMAINS", "near:"}});
  REQUIRE(cfg.is_ok());
  tp::CreateContext ctx;
  ctx.config = &*cfg;
  ctx.store = store;
  ctx.data_address = loom::net::resolve("127.0.0.1:0").value();
  auto none = tp::ofi::make_transport(ctx);
  REQUIRE_FALSE(none.is_ok());
  CHECK_THAT(none.status().message(), Contains("lists no domain after near:"));
}
