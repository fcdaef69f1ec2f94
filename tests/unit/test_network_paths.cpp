// The network transports' own mechanisms: how tcp splits messages
// into parts and reassembles them, the connector's socket count holding for a pair, the
// automatic socket count, rails (several NICs: LOOM_SOCKET_IFNAME=eth0,eth1), the ofi liveness
// connection's authentication, and init not probing libfabric when ofi would not be used. (The
// conformance suite runs every transport, including "tcp-striped", through the Connection seam.)
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <latch>
#include <thread>

#include "comm_harness.hpp"
#include "config/config.hpp"
#include "core/peer_transports.hpp"
#include "transport_pairs.hpp"
#include "transports/tcp/tcp_rails.hpp"
#include "transports/tcp/wire.hpp"

using namespace std::chrono_literals;
using Catch::Matchers::Contains;
using loom::Deadline;
using loom::ErrorCode;
using loom::Result;
using loom::Status;
namespace tp = loom::transport;
namespace tcp = loom::transport::tcp;
namespace lt = loom::test;

namespace {

using Bytes = std::vector<std::uint8_t>;

tp::Tag tag_for(std::uint64_t seq) {
  tp::Tag t;
  t.seq = seq;
  t.count = seq + 1;
  return t;
}

std::uint8_t byte_of(int rank, std::size_t msg, std::size_t i) {
  return static_cast<std::uint8_t>(rank * 89 + msg * 13 + i * 5 + (i >> 12));
}

// Two tcp transports with their own options (rank 0 connects, rank 1 accepts), connected.
struct TcpPair {
  std::array<std::unique_ptr<tcp::TcpTransport>, 2> t;
  tp::Connection& conn(int r) const { return *t[static_cast<std::size_t>(r)]->get(1 - r); }
  tcp::TcpConnection& tcp_conn(int r) const { return dynamic_cast<tcp::TcpConnection&>(conn(r)); }
};

Result<TcpPair> connect_tcp(const tcp::TcpOptions& o0, const tcp::TcpOptions& o1) {
  TcpPair p;
  LOOM_ASSIGN_OR_RETURN(loom::net::SocketAddress any, loom::net::resolve("127.0.0.1:0"));
  std::uint64_t id = lt::random_comm_id();
  LOOM_ASSIGN_OR_RETURN(p.t[0], tcp::TcpTransport::listen(0, 2, id, any, o0));
  LOOM_ASSIGN_OR_RETURN(p.t[1], tcp::TcpTransport::listen(1, 2, id, any, o1));
  for (auto& t : p.t) {
    t->set_peer_addresses({p.t[0]->address(), p.t[1]->address()});
    t->set_peer_rails({p.t[0]->card_rails(), p.t[1]->card_rails()});
  }
  auto st = lt::run_ranks([&](int r) {
    return p.t[static_cast<std::size_t>(r)]->ensure({1 - r}, Deadline::after(20s));
  });
  LOOM_RETURN_IF_ERROR(st[0]);
  LOOM_RETURN_IF_ERROR(st[1]);
  return p;
}

// Both ranks send `sizes` to each other at once (window 3) and check every byte received.
Status exchange(tp::Connection& c, int rank, const std::vector<std::size_t>& sizes) {
  std::vector<Bytes> out(sizes.size()), in(sizes.size());
  std::vector<lt::PostFn> posts;
  for (std::size_t m = 0; m < sizes.size(); ++m) {
    out[m].resize(sizes[m]);
    for (std::size_t i = 0; i < sizes[m]; ++i) out[m][i] = byte_of(rank, m, i);
    in[m].assign(sizes[m], 0xee);
    posts.emplace_back([&, m] {
      return c.irecv({in[m].data(), in[m].size()}, 0, sizes[m], tag_for(m));
    });
    posts.emplace_back([&, m] {
      return c.isend({out[m].data(), out[m].size()}, 0, sizes[m], tag_for(m));
    });
  }
  LOOM_RETURN_IF_ERROR(lt::drive(c, posts, 6, Deadline::after(60s)));
  for (std::size_t m = 0; m < sizes.size(); ++m)
    for (std::size_t i = 0; i < sizes[m]; ++i)
      if (in[m][i] != byte_of(1 - rank, m, i))
        return loom::make_error(ErrorCode::Internal, "rank {}: message {} ({} B) differs at {}",
                                rank, m, sizes[m], i);
  return Status::ok();
}

}  // namespace

TEST_CASE("tcp striping: parts cover the message exactly, uneven, none empty", "[tcp]") {
  const std::size_t min = 64u << 10;
  CHECK(tcp::stripe_parts(2 * min - 1, 4, min) == 1);  // below twice the threshold: one part
  CHECK(tcp::stripe_parts(10u << 20, 1, min) == 1);    // one socket: never striped
  CHECK(tcp::stripe_parts(10u << 20, 4, 0) == 1);      // striping off
  CHECK(tcp::stripe_parts(2 * min, 4, min) == 2);
  CHECK(tcp::stripe_parts(10u << 20, 16, min) == tcp::kMaxParts);
  const std::vector<std::size_t> lens = {2 * min, 3 * min + 12'345, (1u << 20) + 1, (5u << 20) + 3,
                                         7 * min - 1};
  for (std::size_t len : lens) {
    for (std::size_t socks : {2u, 3u, 5u, 8u, 16u}) {
      std::size_t n = tcp::stripe_parts(len, socks, min);
      std::size_t each = tcp::stripe_part_len(len, n);
      INFO("len " << len << ", sockets " << socks << ": " << n << " parts of " << each);
      REQUIRE(n >= 1);
      CHECK(n <= std::min(socks, tcp::kMaxParts));
      CHECK(each % tcp::kStripeAlign == 0);
      CHECK((n - 1) * each < len);  // the last part is not empty
      CHECK(len - (n - 1) * each <= each);
    }
  }
  // An uneven split: the last part is the short one.
  std::size_t len = 3 * min + 12'345;
  std::size_t n = tcp::stripe_parts(len, 3, min);
  REQUIRE(n == 3);
  CHECK(len - 2 * tcp::stripe_part_len(len, n) < tcp::stripe_part_len(len, n));
}

TEST_CASE("tcp striping: uneven parts over many sockets reassemble in order", "[tcp]") {
  const int sockets = GENERATE(3, 7, 16);
  const int threads = GENERATE(0, 1);
  INFO(sockets << " sockets, " << threads << " progress threads");
  tcp::TcpOptions o;
  o.sockets_per_peer = sockets;
  o.progress_threads = threads;
  o.stripe_min = 64u << 10;
  auto p = connect_tcp(o, o);
  INFO(p.status().message());
  REQUIRE(p.is_ok());
  for (int r = 0; r < 2; ++r) {
    CHECK(p->tcp_conn(r).sockets() == static_cast<std::size_t>(sockets));
    CHECK(p->tcp_conn(r).stripe_min() == (64u << 10));
  }
  // Striped and unstriped messages interleaved, so parts start on every socket in turn.
  const std::vector<std::size_t> sizes = {
      (3u << 16) + 12'345, 7, (1u << 20) + 1, 0,       2u << 16, 200'003,
      (5u << 20) + 3,      1, 131'071,        131'072, 999'999};
  auto st = lt::run_ranks([&](int r) { return exchange(p->conn(r), r, sizes); });
  INFO(st[0].message() << " / " << st[1].message());
  CHECK(st[0].is_ok());
  CHECK(st[1].is_ok());
}

TEST_CASE("tcp: the connecting rank's socket count and threshold hold for the pair", "[tcp]") {
  tcp::TcpOptions o0, o1;
  o0.sockets_per_peer = 3;
  o0.stripe_min = 96u << 10;
  o1.sockets_per_peer = 11;  // rank 1 accepts: adopts rank 0's choice
  o1.stripe_min = 0;
  o0.progress_threads = o1.progress_threads = 0;
  auto p = connect_tcp(o0, o1);
  INFO(p.status().message());
  REQUIRE(p.is_ok());
  for (int r = 0; r < 2; ++r) {
    CHECK(p->tcp_conn(r).sockets() == 3);
    CHECK(p->tcp_conn(r).stripe_min() == (96u << 10));
  }
  auto st = lt::run_ranks([&](int r) {
    return exchange(p->conn(r), r, {(1u << 20) + 77, 5, 300'000});
  });
  CHECK(st[0].is_ok());
  CHECK(st[1].is_ok());
}

TEST_CASE("tcp: automatic socket count from CPUs per rank", "[tcp]") {
  CHECK(tcp::choose_sockets(0, 2, 2) == 2);  // oversubscribed or one CPU each: two streams
  CHECK(tcp::choose_sockets(0, 2, 4) == 2);
  CHECK(tcp::choose_sockets(0, 16, 4) == 4);
  CHECK(tcp::choose_sockets(0, 96, 8) == 8);  // capped
  CHECK(tcp::choose_sockets(0, 8, 0) == 8);
  CHECK(tcp::choose_sockets(5, 96, 1) == 5);  // a setting is taken as is
  CHECK(tcp::choose_sockets(40, 96, 1) == static_cast<int>(tcp::kMaxSockets));
}

TEST_CASE("tcp rails: sockets per rail and their pairing", "[tcp][rails]") {
  CHECK(tcp::sockets_for_rails(2, 1, 16) == 2);
  CHECK(tcp::sockets_for_rails(2, 2, 16) == 2);
  CHECK(tcp::sockets_for_rails(3, 2, 16) == 4);  // every rail as many sockets
  CHECK(tcp::sockets_for_rails(1, 3, 16) == 3);  // at least one per rail
  CHECK(tcp::sockets_for_rails(5, 3, 16) == 6);
  CHECK(tcp::sockets_for_rails(16, 3, 16) == 15);  // the cap, still even
  CHECK(tcp::sockets_for_rails(2, 8, 16) == 8);
  using P = tcp::RailPair;
  CHECK(tcp::rail_plan(6, 3, 2) == std::vector<P>{{0, 0}, {1, 1}, {2, 0}, {0, 1}, {1, 0}, {2, 1}});
  CHECK(tcp::rail_plan(4, 2, 1) == std::vector<P>{{0, 0}, {1, 0}, {0, 0}, {1, 0}});
  CHECK(tcp::rail_plan(2, 1, 1) == std::vector<P>{{0, 0}, {0, 0}});
}

TEST_CASE("tcp rails: LOOM_SOCKET_IFNAME's further interfaces, and bad lists", "[tcp][rails]") {
  auto rails = [](const std::string& list) {
    auto cfg = loom::config::Config::load({{"LOOM_SOCKET_IFNAME", list}});
    REQUIRE(cfg.is_ok());
    return tcp::extra_rails(*cfg);
  };
  for (const char* one : {"", "lo", ",lo,"}) {
    auto r = rails(one);
    REQUIRE(r.is_ok());
    CHECK(r->empty());
  }
  auto missing = rails("lo,nosuchnic9");
  REQUIRE_FALSE(missing.is_ok());
  CHECK(missing.status().code() == ErrorCode::InvalidUsage);
  CHECK_THAT(missing.status().message(), Contains("nosuchnic9"));
  auto twice = rails("lo,lo");
  REQUIRE_FALSE(twice.is_ok());
  CHECK_THAT(twice.status().message(), Contains("same address"));
  auto many = rails("lo,lo,lo,lo,lo,lo,lo,lo,lo");
  REQUIRE_FALSE(many.is_ok());
  CHECK_THAT(many.status().message(), Contains("at most 8"));
}

namespace {

// The IP address (without port) at either end of a connected socket.
std::string ip_at(int fd, bool peer_end) {
  loom::net::SocketAddress a;
  a.len = sizeof a.storage;
  int rc = peer_end ? ::getpeername(fd, a.raw(), &a.len) : ::getsockname(fd, a.raw(), &a.len);
  if (rc != 0) return "error";
  a.set_port(0);
  return a.to_string();
}

}  // namespace

TEST_CASE("tcp rails: every socket joins its pair of rails; messages cross them exactly",
          "[tcp][rails]") {
  // Loopback addresses stand in for NICs: rank 0 has 3 rails, rank 1 has 2.
  const std::array<std::vector<std::string>, 2> ips = {
      std::vector<std::string>{"127.0.0.1", "127.0.0.2", "127.0.0.3"},
      std::vector<std::string>{"127.0.0.1", "127.0.0.4"}};
  std::array<tcp::TcpOptions, 2> o;
  for (std::size_t r = 0; r < 2; ++r) {
    o[r].sockets_per_peer = 5;
    o[r].progress_threads = static_cast<int>(r);  // rank 1 moves bytes on a progress thread
    o[r].stripe_min = 64u << 10;
    for (std::size_t i = 1; i < ips[r].size(); ++i)
      o[r].rails.push_back(loom::net::resolve(ips[r][i] + ":0").value());
  }
  auto p = connect_tcp(o[0], o[1]);
  INFO(p.status().message());
  REQUIRE(p.is_ok());
  CHECK(p->t[0]->card_rails().size() == 2);
  CHECK(p->t[1]->card_rails().size() == 1);
  for (int r = 0; r < 2; ++r) {
    const auto me = static_cast<std::size_t>(r);
    const auto& mine = ips[me];
    const auto& theirs = ips[1 - me];
    REQUIRE(p->tcp_conn(r).sockets() == 6);  // 5 rounded up to 2 per rail of the larger side
    for (std::size_t i = 0; i < 6; ++i) {
      INFO("rank " << r << ", socket " << i);
      const int fd = p->tcp_conn(r).socket_fd(i);
      CHECK(ip_at(fd, false) == mine[i % mine.size()] + ":0");
      CHECK(ip_at(fd, true) == theirs[i % theirs.size()] + ":0");
    }
  }
  const std::vector<std::size_t> sizes = {(3u << 16) + 12'345, 7, (1u << 20) + 1, 0, 200'003,
                                          (5u << 20) + 3,      1, 131'072};
  auto st = lt::run_ranks([&](int r) { return exchange(p->conn(r), r, sizes); });
  INFO(st[0].message() << " / " << st[1].message());
  CHECK(st[0].is_ok());
  CHECK(st[1].is_ok());
}

TEST_CASE("ofi: a liveness connection with the wrong job secret is rejected", "[ofi]") {
  std::string provider;
  for (const char* prov : {"tcp;ofi_rxm", "shm"})
    if (provider.empty() && tp::ofi::probe_provider({prov, "127.0.0.1"}).is_ok()) provider = prov;
  if (provider.empty()) {
    WARN("no libfabric provider (tcp;ofi_rxm, shm) here: skipped");
    return;
  }
  const bool same = GENERATE(false, true);
  INFO(provider << (same ? ", same secret" : ", different secrets"));
  auto store = std::make_shared<loom::bootstrap::InMemoryStore>();
  std::uint64_t id = lt::random_comm_id();
  std::array<std::unique_ptr<tp::ofi::OfiTransport>, 2> t;
  for (int r = 0; r < 2; ++r) {
    tp::ofi::OfiOptions o;
    o.fabric = {provider, "127.0.0.1"};
    o.liveness_bind = loom::net::resolve("127.0.0.1:0").value();
    o.secret.fill(0x5a);
    if (r == 1 && !same) o.secret[7] ^= 1;
    auto created = tp::ofi::OfiTransport::create(r, 2, id, store, o);
    INFO(created.status().message());
    REQUIRE(created.is_ok());
    t[static_cast<std::size_t>(r)] = std::move(created).value();
  }
  // The acceptor (rank 1) gives up after 5 s; the connector hears the rejection at once.
  auto st = lt::run_ranks([&](int r) {
    return t[static_cast<std::size_t>(r)]->ensure({1 - r},
                                                  Deadline::after(same || r == 0 ? 20s : 5s));
  });
  if (same) {
    CHECK(st[0].is_ok());
    CHECK(st[1].is_ok());
    return;
  }
  // Rank 0 connects and is turned away; rank 1 never accepts it and runs out of time.
  INFO(st[0].message() << " / " << st[1].message());
  CHECK(st[0].code() == ErrorCode::PeerFailed);
  CHECK_THAT(st[0].message(), Contains("rank 1 rejected") && Contains("secret"));
  CHECK(st[1].code() == ErrorCode::Timeout);
  CHECK(t[0]->get(1) == nullptr);
  CHECK(t[1]->get(0) == nullptr);
}

TEST_CASE("init does not probe libfabric when ofi would not be used", "[ofi]") {
  auto any = loom::net::resolve("127.0.0.1:0").value();
  if (tp::ofi::efa_device_present()) {
    WARN("this host has an EFA device: the default list probes it");
    return;
  }
  auto cfg = loom::config::Config::load({{"LOOM_TRANSPORTS", ""}, {"LOOM_OFI_PROVIDER", ""}});
  REQUIRE(cfg.is_ok());
  std::uint64_t before = tp::ofi::getinfo_calls();
  auto list = loom::detail::effective_transports(0, cfg.value(), any);
  REQUIRE(list.is_ok());
  CHECK(list.value() == "shm,tcp");
  CHECK(tp::ofi::getinfo_calls() == before);
  // Asked for: probed.
  auto asked = loom::config::Config::load({{"LOOM_TRANSPORTS", "ofi,tcp"}});
  REQUIRE(asked.is_ok());
  REQUIRE(loom::detail::effective_transports(0, asked.value(), any).is_ok());
  CHECK(tp::ofi::getinfo_calls() > before);
}

TEST_CASE("tcp progress threads: destroyed with transfers in flight, they stop promptly", "[tcp]") {
  tcp::TcpOptions o;
  o.sockets_per_peer = 3;
  o.progress_threads = 2;
  auto p = connect_tcp(o, o);
  INFO(p.status().message());
  REQUIRE(p.is_ok());
  // Rank 0: a receive that never comes and a send far larger than the socket buffers, so both
  // threads sit in poll(2) with work queued when the transport goes.
  Bytes in(1000), out(64u << 20, 3);
  tp::Connection& c = p->conn(0);
  REQUIRE(c.irecv({in.data(), in.size()}, 0, in.size(), tag_for(1)).is_ok());
  auto send = c.isend({out.data(), out.size()}, 0, out.size(), tag_for(2));
  REQUIRE(send.is_ok());
  auto done = c.test(send.value());
  REQUIRE(done.is_ok());
  CHECK_FALSE(done.value());
  auto t0 = loom::Clock::now();
  p->t[0].reset();
  CHECK(loom::Clock::now() - t0 < 1s);
  auto t1 = loom::Clock::now();
  p->t[1].reset();
  CHECK(loom::Clock::now() - t1 < 1s);
}

TEST_CASE("tcp progress threads: abort() during a transfer, then teardown, stay bounded",
          "[tcp][reliability]") {
  std::latch aborted(1);
  loom::test::run_ranks(
      2,
      [&](loom::Communicator& comm) {
        if (comm.rank() == 1) {  // never calls: rank 0's operation stays in flight
          aborted.wait();
          return;
        }
        std::vector<float> buf(8 << 20, 1.0f);
        loom::Work w = comm.allreduce(std::span<float>(buf), loom::RedOp::Sum);
        CHECK_FALSE(w.test());
        auto t0 = loom::Clock::now();
        comm.abort();
        CHECK(loom::Clock::now() - t0 < 1s);
        aborted.count_down();
        auto e = loom::test::catch_error([&] { w.wait(std::chrono::milliseconds(2000)); });
        CHECK(e.code() == ErrorCode::Aborted);
      },
      {{"LOOM_TRANSPORTS", "tcp"}, {"LOOM_TCP_THREADS", "2"}, {"LOOM_TIMEOUT", "30s"}});
}

TEST_CASE("collectives over tcp with progress threads and striping are exact", "[tcp]") {
  // Every rank contributes rank+1 in every element: sums are exact in float.
  for (int n : {2, 3}) {
    loom::test::run_ranks(
        n,
        [&](loom::Communicator& comm) {
          const std::size_t count = (3u << 18) + 17;  // 3 MiB of floats + a tail: striped
          std::vector<float> buf(count, static_cast<float>(comm.rank() + 1));
          comm.allreduce(std::span<float>(buf), loom::RedOp::Sum).wait();
          const float want = static_cast<float>(n * (n + 1) / 2);
          CHECK(std::count(buf.begin(), buf.end(), want) == static_cast<std::ptrdiff_t>(count));
        },
        {{"LOOM_TRANSPORTS", "tcp"},
         {"LOOM_TCP_THREADS", "1"},
         {"LOOM_SOCKETS_PER_PEER", "3"},
         {"LOOM_CHUNK_SIZE", "1M"},
         {"LOOM_SOCKET_STRIPE_MIN", "64K"}});
  }
}

TEST_CASE("collectives over ofi with the progress thread are exact", "[ofi]") {
  if (!tp::ofi::probe_provider({"tcp;ofi_rxm", "127.0.0.1"}).is_ok()) {
    WARN("libfabric provider tcp;ofi_rxm is not available: skipped");
    return;
  }
  for (int n : {2, 3}) {
    loom::test::run_ranks(
        n,
        [&](loom::Communicator& comm) {
          const std::size_t count = (1u << 20) + 5;  // 4 MiB of int32 + a tail
          std::vector<std::int32_t> buf(count, comm.rank() + 1);
          comm.allreduce(std::span<std::int32_t>(buf), loom::RedOp::Sum).wait();
          const std::int32_t want = n * (n + 1) / 2;
          CHECK(std::count(buf.begin(), buf.end(), want) == static_cast<std::ptrdiff_t>(count));
          std::vector<std::int32_t> small(3, comm.rank());
          comm.allreduce(std::span<std::int32_t>(small), loom::RedOp::Max).wait();
          CHECK(small == std::vector<std::int32_t>(3, n - 1));
        },
        {{"LOOM_TRANSPORTS", "ofi"},
         {"LOOM_OFI_PROVIDER", "tcp;ofi_rxm"},
         {"LOOM_OFI_FALLBACK", "false"},
         {"LOOM_OFI_PROGRESS_THREAD", "1"}});
  }
}
