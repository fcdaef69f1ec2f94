// Tests of the rendezvous stores (in-memory and TCP) and of store_allgather / store_barrier,
// with threads as ranks.
#include <sys/socket.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/memory_store.hpp"
#include "bootstrap/store.hpp"
#include "bootstrap/tcp_store.hpp"
#include "bootstrap/tcp_store_wire.hpp"
#include "common/crypto.hpp"
#include "store_harness.hpp"

using namespace store_test;  // Clock, Deadline, ErrorCode, bs, net, wire and the helpers

namespace {

// One store view per rank: all ranks share one InMemoryStore...
struct MemoryRanks {
  explicit MemoryRanks(int /*nranks*/) {}
  bs::Store& store(int /*rank*/) { return shared; }
  bs::InMemoryStore shared;
};

// ...or each rank has its own TcpStoreClient to one server.
struct TcpRanks {
  explicit TcpRanks(int nranks) : server(start_server()) {
    for (int r = 0; r < nranks; ++r) clients.push_back(connect_client(*server, r));
  }
  bs::Store& store(int rank) { return *clients[static_cast<std::size_t>(rank)]; }
  std::unique_ptr<bs::TcpStoreServer> server;
  std::vector<std::unique_ptr<bs::TcpStoreClient>> clients;
};

// Runs fn(rank) on nranks threads and joins them.
template <typename Fn>
void run_ranks(int nranks, Fn fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) threads.emplace_back(fn, r);
  for (auto& t : threads) t.join();
}

}  // namespace

TEMPLATE_TEST_CASE("bootstrap: store set, get and add", "", MemoryRanks, TcpRanks) {
  TestType ranks(1);
  bs::Store& s = ranks.store(0);
  REQUIRE(s.set("a", bytes("hello")).is_ok());
  auto a = s.get("a", Deadline::after(2s));
  REQUIRE(a.is_ok());
  CHECK(text(a.value()) == "hello");
  REQUIRE(s.set("a", bytes("overwritten")).is_ok());
  CHECK(text(s.get("a", Deadline::after(2s)).value()) == "overwritten");
  REQUIRE(s.set("empty", {}).is_ok());
  CHECK(s.get("empty", Deadline::after(2s)).value().empty());

  CHECK(s.add("n", 5).value() == 5);
  CHECK(s.add("n", -7).value() == -2);
  CHECK(text(s.get("n", Deadline::after(2s)).value()) == "-2");
  auto bad = s.add("a", 1);
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().code() == ErrorCode::InvalidArgument);
  CHECK_THAT(bad.status().message(), Catch::Contains("'a'"));
  REQUIRE(s.add("big", INT64_MAX).is_ok());
  CHECK(s.add("big", 1).status().code() == ErrorCode::InvalidArgument);
  check_still_works(s, "after-errors");
}

TEMPLATE_TEST_CASE("bootstrap: store get waits for a later set", "", MemoryRanks, TcpRanks) {
  TestType ranks(3);
  std::latch waiting(2);
  loom::Result<bs::Bytes> got1 = loom::Status(ErrorCode::Internal, "not run");
  loom::Result<bs::Bytes> got2 = loom::Status(ErrorCode::Internal, "not run");
  std::thread t1([&] {
    waiting.count_down();
    got1 = ranks.store(1).get("late", Deadline::after(5s));
  });
  std::thread t2([&] {
    waiting.count_down();
    got2 = ranks.store(2).get("late", Deadline::after(5s));
  });
  waiting.wait();
  std::this_thread::sleep_for(20ms);  // most likely both gets are parked by now
  REQUIRE(ranks.store(0).set("late", bytes("value")).is_ok());
  t1.join();
  t2.join();
  REQUIRE(got1.is_ok());
  REQUIRE(got2.is_ok());
  CHECK(text(got1.value()) == "value");
  CHECK(text(got2.value()) == "value");
}

TEMPLATE_TEST_CASE("bootstrap: store get times out naming the key", "", MemoryRanks, TcpRanks) {
  TestType ranks(1);
  bs::Store& s = ranks.store(0);
  auto start = Clock::now();
  auto r = s.get("never-set", Deadline::after(60ms));
  REQUIRE_FALSE(r.is_ok());
  CHECK(r.status().code() == ErrorCode::Timeout);
  CHECK_THAT(r.status().message(), Catch::Contains("never-set"));
  CHECK(elapsed_ms(start) >= 55);
  CHECK(elapsed_ms(start) < 1000);
  start = Clock::now();
  CHECK(s.get("never-set", Deadline::after(0ms)).status().code() == ErrorCode::Timeout);
  CHECK(elapsed_ms(start) < 500);
  check_still_works(s, "after-timeout");  // the TCP connection stays in sync
}

TEMPLATE_TEST_CASE("bootstrap: store allgather and barrier with threads as ranks", "", MemoryRanks,
                   TcpRanks) {
  for (int n : {1, 2, 5, 8}) {
    INFO("nranks = " << n);
    TestType ranks(n);
    std::vector<loom::Status> status(static_cast<std::size_t>(n));
    std::vector<std::vector<bs::Bytes>> gathered(static_cast<std::size_t>(n));
    run_ranks(n, [&](int r) {
      auto& st = status[static_cast<std::size_t>(r)];
      bs::Store& s = ranks.store(r);
      auto value = bytes(std::string(static_cast<std::size_t>(r), 'a' + static_cast<char>(r)));
      auto g = bs::store_allgather(s, "ag", r, n, value, Deadline::after(5s));
      st = g.status();
      if (!st.is_ok()) return;
      gathered[static_cast<std::size_t>(r)] = std::move(g).value();
      for (int round = 0; round < 3 && st.is_ok(); ++round) {
        st = s.add("arrived" + std::to_string(round), 1).status();
        if (st.is_ok())
          st = bs::store_barrier(s, "b" + std::to_string(round), r, n, Deadline::after(5s));
        // After the barrier every rank has counted itself in.
        auto c = s.get("arrived" + std::to_string(round), Deadline::after(1s));
        if (st.is_ok() && (!c.is_ok() || text(c.value()) != std::to_string(n))) {
          st = loom::Status(ErrorCode::Internal, "barrier let rank through early");
        }
      }
    });
    for (int r = 0; r < n; ++r) {
      INFO("rank " << r);
      REQUIRE(status[static_cast<std::size_t>(r)].message() == "");
      const auto& g = gathered[static_cast<std::size_t>(r)];
      REQUIRE(g.size() == static_cast<std::size_t>(n));
      for (int q = 0; q < n; ++q) {
        CHECK(text(g[static_cast<std::size_t>(q)]) ==
              std::string(static_cast<std::size_t>(q), 'a' + static_cast<char>(q)));
      }
    }
  }
}

TEMPLATE_TEST_CASE("bootstrap: allgather and barrier timeouts name what is missing", "",
                   MemoryRanks, TcpRanks) {
  TestType ranks(1);
  bs::Store& s = ranks.store(0);
  REQUIRE(s.set("job/2", bytes("x")).is_ok());  // rank 2 has published; 1 and 3 have not
  auto g = bs::store_allgather(s, "job", 0, 4, bytes("r0"), Deadline::after(50ms));
  REQUIRE_FALSE(g.is_ok());
  CHECK(g.status().code() == ErrorCode::Timeout);
  CHECK_THAT(g.status().message(), Catch::Contains("'job'") && Catch::Contains(": 1, 3"));

  auto b = bs::store_barrier(s, "setup", 0, 3, Deadline::after(50ms));
  CHECK(b.code() == ErrorCode::Timeout);
  CHECK_THAT(b.message(), Catch::Contains("'setup'") && Catch::Contains("1 of 3"));

  CHECK(bs::store_barrier(s, "x", 3, 3, Deadline::after(50ms)).code() ==
        ErrorCode::InvalidArgument);
  CHECK(bs::store_allgather(s, "y", 0, 0, {}, Deadline::after(50ms)).status().code() ==
        ErrorCode::InvalidArgument);
  REQUIRE(bs::store_barrier(s, "once", 0, 1, Deadline::after(1s)).is_ok());
  CHECK(bs::store_barrier(s, "once", 0, 1, Deadline::after(1s)).code() == ErrorCode::InvalidUsage);
}

TEMPLATE_TEST_CASE("bootstrap: a rank that will not reach a barrier fails it for the others", "",
                   MemoryRanks, TcpRanks) {
  const int n = 4;
  TestType ranks(n);
  std::vector<loom::Status> status(static_cast<std::size_t>(n));
  std::latch waiting(2);
  std::latch failed(1);
  run_ranks(n, [&](int r) {
    auto& st = status[static_cast<std::size_t>(r)];
    bs::Store& s = ranks.store(r);
    if (r == 2) {  // fails while ranks 0 and 1 wait at the barrier
      waiting.wait();
      std::this_thread::sleep_for(20ms);
      st = bs::store_barrier_fail(
          s, "setup", r, loom::Status(ErrorCode::InvalidUsage, "LOOM_ALGO=tree here but ring"));
      failed.count_down();
    } else if (r == 3) {  // fails later: rank 2's reason stands
      failed.wait();
      st = bs::store_barrier_fail(s, "setup", r, loom::Status(ErrorCode::Timeout, "late"));
    } else {
      waiting.count_down();
      st = bs::store_barrier(s, "setup", r, n, Deadline::after(60s));
    }
  });
  REQUIRE(status[2].is_ok());
  REQUIRE(status[3].is_ok());
  for (int r : {0, 1}) {
    INFO("rank " << r);
    const auto& st = status[static_cast<std::size_t>(r)];
    CHECK(st.code() == ErrorCode::InvalidUsage);
    CHECK_THAT(st.message(), Catch::Contains("barrier 'setup' (rank " + std::to_string(r)) &&
                                 Catch::Contains("rank 2 failed before reaching it: "
                                                 "LOOM_ALGO=tree here but ring"));
  }
  // Later arrivals see the failure too.
  auto late = bs::store_barrier(ranks.store(0), "setup", 0, n, Deadline::after(1s));
  CHECK(late.code() == ErrorCode::InvalidUsage);
}

TEST_CASE("bootstrap: tcp store rejects a wrong communicator id, others unaffected") {
  auto server = start_server();
  auto good = connect_client(*server, 0);
  auto setter = connect_client(*server, 1);
  loom::Result<bs::Bytes> got = loom::Status(ErrorCode::Internal, "not run");
  std::latch started(1);
  std::thread waiter([&] {
    started.count_down();
    got = good->get("k", Deadline::after(5s));
  });
  started.wait();
  auto bad = bs::TcpStoreClient::connect(server->address(), kCommId + 1, 2, Deadline::after(2s));
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().code() == ErrorCode::InvalidUsage);
  CHECK_THAT(bad.status().message(), Catch::Contains("another communicator"));
  REQUIRE(setter->set("k", bytes("v")).is_ok());
  waiter.join();
  REQUIRE(got.is_ok());
  CHECK(text(got.value()) == "v");
}

TEST_CASE("bootstrap: tcp store drops garbage and invalid requests") {
  auto server = start_server();
  auto good = connect_client(*server, 0);
  SECTION("garbage instead of a hello") {
    auto fd = net::connect_with_retry(server->address(), Deadline::after(2s));
    REQUIRE(fd.is_ok());
    std::vector<std::uint8_t> junk(wire::kHelloBytes + 16, 0xab);
    REQUIRE(net::send_all(fd.value().get(), junk.data(), junk.size(), Deadline::after(2s), "junk")
                .is_ok());
    CHECK(server_drops(fd.value().get()));
  }
  SECTION("unknown opcode") {
    net::Fd fd = raw_hello(*server);
    auto req = wire::encode_request({.op = 99, .key_len = 1, .arg = 0});
    REQUIRE(net::send_all(fd.get(), req.data(), req.size(), Deadline::after(2s), "req").is_ok());
    CHECK(server_drops(fd.get()));
  }
  SECTION("oversized key and value lengths") {
    for (auto h : {wire::RequestHeader{1, 5000, 0}, wire::RequestHeader{2, 0, 0},
                   wire::RequestHeader{1, 4, (std::uint64_t{64} << 20) + 1}}) {
      net::Fd fd = raw_hello(*server);
      auto req = wire::encode_request(h);
      REQUIRE(net::send_all(fd.get(), req.data(), req.size(), Deadline::after(2s), "r").is_ok());
      CHECK(server_drops(fd.get()));
    }
  }
  SECTION("client-side limits") {
    CHECK(good->set(std::string(5000, 'k'), bytes("v")).code() == ErrorCode::InvalidArgument);
    CHECK(good->set("", bytes("v")).code() == ErrorCode::InvalidArgument);
  }
  check_still_works(*good, "survivor");
}

TEST_CASE("bootstrap: tcp store carries large values") {
  auto server = start_server();
  auto a = connect_client(*server, 0);
  auto b = connect_client(*server, 1);
  bs::Bytes big(8 << 20);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<std::uint8_t>(i * 31 + 7);
  REQUIRE(a->set("big", big).is_ok());
  auto got = b->get("big", Deadline::after(5s));
  REQUIRE(got.is_ok());
  CHECK(got.value() == big);
}

TEST_CASE("bootstrap: tcp client connects to a server that starts late") {
  auto probe = start_server();
  net::SocketAddress addr = probe->address();
  probe.reset();  // the port is free again, nobody listens
  std::latch client_trying(1);
  std::unique_ptr<bs::TcpStoreServer> late;
  std::thread starter([&] {
    client_trying.wait();
    std::this_thread::sleep_for(20ms);
    auto s = bs::TcpStoreServer::start(addr, kCommId);
    if (s.is_ok()) late = std::move(s).value();
  });
  client_trying.count_down();
  auto c = bs::TcpStoreClient::connect(addr, kCommId, 0, Deadline::after(5s));
  starter.join();
  REQUIRE(late != nullptr);
  REQUIRE(c.is_ok());
  check_still_works(*c.value(), "late");
}

TEST_CASE("bootstrap: tcp server shutdown fails blocked clients promptly") {
  auto server = start_server();
  std::string addr = server->address().to_string();
  constexpr int kClients = 3;
  std::vector<std::unique_ptr<bs::TcpStoreClient>> clients;
  for (int r = 0; r < kClients; ++r) clients.push_back(connect_client(*server, r));
  auto idle = connect_client(*server, kClients);  // connected, not waiting
  std::vector<loom::Status> got(kClients);
  std::latch started(kClients);
  std::vector<std::thread> threads;
  for (int r = 0; r < kClients; ++r) {
    threads.emplace_back([&, r] {
      started.count_down();
      got[static_cast<std::size_t>(r)] =
          clients[static_cast<std::size_t>(r)]->get("never", Deadline::after(10s)).status();
    });
  }
  started.wait();
  std::this_thread::sleep_for(20ms);  // most likely all gets are parked by now
  const auto start = Clock::now();
  server.reset();
  CHECK(elapsed_ms(start) < 1000);
  for (auto& t : threads) t.join();
  CHECK(elapsed_ms(start) < 2000);
  for (const auto& s : got) {
    CHECK(s.code() == ErrorCode::PeerFailed);
    CHECK_THAT(s.message(), Catch::Contains("rendezvous server at " + addr + " shut down"));
  }
  // A clean shutdown (the server said Closing) is not a lost server.
  for (const auto& c : clients) CHECK_FALSE(c->server_lost());
  // The client is broken for good: later calls fail at once.
  auto again = clients[0]->get("x", Deadline::after(5s));
  CHECK(again.status().code() == ErrorCode::PeerFailed);
  CHECK(idle->set("x", bytes("y")).code() == ErrorCode::PeerFailed);
  CHECK(elapsed_ms(start) < 2000);
}

namespace {

// A fake server on a fresh listener: `serve` runs on a thread with the accepted connection.
struct FakeServer {
  net::Fd listener;
  net::SocketAddress addr;
  std::thread thread;
  template <typename Fn>
  explicit FakeServer(Fn serve) {
    auto l = net::listen_on(loopback_any_port());
    REQUIRE(l.is_ok());
    listener = std::move(l).value();
    auto a = net::bound_address(listener.get());
    REQUIRE(a.is_ok());
    addr = a.value();
    thread = std::thread([this, serve] {
      auto accepted = net::accept_until(listener.get(), Deadline::after(5s));
      if (accepted.is_ok()) serve(accepted.value().get());
    });
  }
  ~FakeServer() {
    if (thread.joinable()) thread.join();
  }
  FakeServer(const FakeServer&) = delete;
  FakeServer& operator=(const FakeServer&) = delete;
};

// The server side of the hello up to the ack: challenge out, hello in, Ok ack out. Returns the
// client's hello (empty on a failure).
std::vector<std::uint8_t> accept_hello(int fd, Deadline d) {
  auto challenge = wire::encode_challenge(loom::crypto::Nonce{});
  std::vector<std::uint8_t> hello(wire::kHelloBytes);
  auto ack = wire::encode_ack(wire::AckStatus::Ok);
  if (!net::send_all(fd, challenge.data(), challenge.size(), d, "challenge").is_ok() ||
      !net::recv_all(fd, hello.data(), hello.size(), d, "hello").is_ok() ||
      !net::send_all(fd, ack.data(), ack.size(), d, "ack").is_ok())
    return {};
  return hello;
}

}  // namespace

TEST_CASE("bootstrap: a tcp server that dies without a shutdown is reported lost") {
  // A fake server that accepts, authenticates the client like the real one, reads its first
  // request and then vanishes (what a killed process looks like from the client).
  FakeServer fake([](int fd) {
    const Deadline d = Deadline::after(5s);
    auto hello = accept_hello(fd, d);
    if (hello.empty()) return;
    loom::crypto::Nonce theirs{};  // the server's proof, on the client's nonce
    std::copy_n(hello.data() + wire::kHelloFieldBytes + 32, theirs.size(), theirs.begin());
    auto proof =
        loom::crypto::prove({}, wire::kServerDomain, theirs,
                            std::span<const std::uint8_t>(hello.data(), wire::kHelloFieldBytes));
    if (!net::send_all(fd, proof.data(), proof.size(), d, "proof").is_ok()) return;
    std::array<std::uint8_t, wire::kRequestHeaderBytes> request{};
    (void)net::recv_all(fd, request.data(), request.size(), d, "request");
  });  // the connection closes when `serve` returns, without a Closing frame
  auto client = bs::TcpStoreClient::connect(fake.addr, kCommId, 1, Deadline::after(5s));
  REQUIRE(client.is_ok());
  CHECK_FALSE(client.value()->server_lost());
  const auto start = Clock::now();
  auto got = client.value()->get("k", Deadline::after(10s));
  fake.thread.join();
  CHECK(elapsed_ms(start) < 2000);
  CHECK(got.status().code() == ErrorCode::PeerFailed);
  CHECK_THAT(got.status().message(), Catch::Contains("without a shutdown"));
  CHECK(client.value()->server_lost());
}

// A fake server that serves two gets on one connection, holding the first answer back 2.5 s:
// longer than a get's grace past its deadline, far shorter than a failure deadline.
TEST_CASE("bootstrap: a slow tcp server keeps the connection; its late answer is skipped") {
  std::atomic<int> later_connections{0};
  FakeServer slow([&later_connections](int fd) {
    const Deadline d = Deadline::after(10s);
    auto hello = accept_hello(fd, d);
    if (hello.empty()) return;
    loom::crypto::Nonce theirs{};
    std::copy_n(hello.data() + wire::kHelloFieldBytes + 32, theirs.size(), theirs.begin());
    auto proof =
        loom::crypto::prove({}, wire::kServerDomain, theirs,
                            std::span<const std::uint8_t>(hello.data(), wire::kHelloFieldBytes));
    if (!net::send_all(fd, proof.data(), proof.size(), d, "proof").is_ok()) return;
    for (int i = 0; i < 2; ++i) {
      std::array<std::uint8_t, wire::kRequestHeaderBytes> head{};
      if (!net::recv_all(fd, head.data(), head.size(), d, "request").is_ok()) return;
      std::string key(wire::decode_request(head.data()).key_len, '\0');
      if (!net::recv_all(fd, key.data(), key.size(), d, "key").is_ok()) return;
      if (i == 0) std::this_thread::sleep_for(2500ms);
      const std::string value = "value of " + key;
      auto reply = wire::encode_response(wire::Reply::Ok, value.size());
      if (!net::send_all(fd, reply.data(), reply.size(), d, "reply").is_ok() ||
          !net::send_all(fd, value.data(), value.size(), d, "value").is_ok())
        return;
    }
  });
  auto client = bs::TcpStoreClient::connect(slow.addr, kCommId, 1, Deadline::after(5s));
  REQUIRE(client.is_ok());
  const auto start = Clock::now();
  auto first = client.value()->get("a", Deadline::after(0ms));
  CHECK(first.status().code() == ErrorCode::Timeout);
  CHECK(elapsed_ms(start) < 2400);
  auto second = client.value()->get("b", Deadline::after(5s));
  REQUIRE(second.is_ok());
  CHECK(text(second.value()) == "value of b");
  CHECK(elapsed_ms(start) < 5000);
  CHECK_FALSE(client.value()->server_lost());
  slow.thread.join();
  // No reconnection was attempted: nobody else knocks on the fake's listener.
  if (net::accept_until(slow.listener.get(), Deadline::after(300ms)).is_ok()) ++later_connections;
  CHECK(later_connections == 0);
}

TEST_CASE("bootstrap: a tcp client joins a server that dropped its first hello (busy)") {
  auto l = net::listen_on(loopback_any_port());
  REQUIRE(l.is_ok());
  auto addr = net::bound_address(l.value().get());
  REQUIRE(addr.is_ok());
  std::thread busy([&l] {
    const Deadline d = Deadline::after(5s);
    {  // the first connection: its hello is read, then dropped unanswered
      auto first = net::accept_until(l.value().get(), d);
      if (!first.is_ok()) return;
      auto challenge = wire::encode_challenge(loom::crypto::Nonce{});
      std::vector<std::uint8_t> hello(wire::kHelloBytes);
      (void)net::send_all(first.value().get(), challenge.data(), challenge.size(), d, "challenge");
      (void)net::recv_all(first.value().get(), hello.data(), hello.size(), d, "hello");
    }
    auto second = net::accept_until(l.value().get(), d);
    if (!second.is_ok()) return;
    const int fd = second.value().get();
    auto hello = accept_hello(fd, d);
    if (hello.empty()) return;
    loom::crypto::Nonce theirs{};
    std::copy_n(hello.data() + wire::kHelloFieldBytes + 32, theirs.size(), theirs.begin());
    auto proof =
        loom::crypto::prove({}, wire::kServerDomain, theirs,
                            std::span<const std::uint8_t>(hello.data(), wire::kHelloFieldBytes));
    (void)net::send_all(fd, proof.data(), proof.size(), d, "proof");
    std::uint8_t bye[wire::kRequestHeaderBytes + 1];
    (void)net::recv_all(fd, bye, sizeof bye, d, "goodbye");
  });
  {
    auto client = bs::TcpStoreClient::connect(addr.value(), kCommId, 1, Deadline::after(5s));
    CHECK(client.is_ok());
  }  // its goodbye ends the fake
  busy.join();
}

TEST_CASE("bootstrap: a tcp server that cannot prove the secret is refused") {
  // An impostor at the store's address: it answers the hello with an Ok ack but a forged proof.
  FakeServer impostor([](int fd) {
    const Deadline d = Deadline::after(5s);
    if (accept_hello(fd, d).empty()) return;
    std::array<std::uint8_t, wire::kServerProofBytes> forged{};
    forged.fill(0x5c);
    (void)net::send_all(fd, forged.data(), forged.size(), d, "forged proof");
  });
  auto client = bs::TcpStoreClient::connect(impostor.addr, kCommId, 1, Deadline::after(5s));
  impostor.thread.join();
  REQUIRE_FALSE(client.is_ok());
  CHECK(client.status().code() == ErrorCode::PeerFailed);
  CHECK_THAT(client.status().message(), Catch::Contains("failed to prove the job's secret"));
}

TEST_CASE("bootstrap: a tcp server serves on a standby listener bound earlier") {
  auto listener = net::listen_on(loopback_any_port());
  REQUIRE(listener.is_ok());
  auto addr = net::bound_address(listener.value().get());
  REQUIRE(addr.is_ok());
  loom::crypto::Secret secret{};
  secret[3] = 7;
  // The client connects first and waits in the listener's backlog for the challenge.
  std::unique_ptr<bs::TcpStoreClient> early;
  std::thread client([&] {
    auto c = bs::TcpStoreClient::connect(addr.value(), kCommId, 1, Deadline::after(5s), secret);
    if (c.is_ok()) early = std::move(c).value();
  });
  auto server = bs::TcpStoreServer::start_on(std::move(listener).value(), kCommId, secret);
  REQUIRE(server.is_ok());
  client.join();
  REQUIRE(early != nullptr);
  check_still_works(*early, "standby");
  // Still authenticated: another secret is turned away.
  loom::crypto::Secret other{};
  auto wrong = bs::TcpStoreClient::connect(addr.value(), kCommId, 2, Deadline::after(2s), other);
  CHECK_FALSE(wrong.is_ok());
}

TEST_CASE("bootstrap: tcp store answers pipelined requests in order") {
  auto server = start_server();
  auto setter = connect_client(*server, 0);
  net::Fd fd = raw_hello(*server);
  // GET "p" (parks until set), then SET "q" = "v", then ADD "n" += 3, sent in one write.
  std::vector<std::uint8_t> msg;
  auto append = [&](wire::Op op, const std::string& key, std::uint64_t arg,
                    const std::string& value) {
    auto h = wire::encode_request(
        {static_cast<std::uint8_t>(op), static_cast<std::uint32_t>(key.size()), arg});
    msg.insert(msg.end(), h.begin(), h.end());
    msg.insert(msg.end(), key.begin(), key.end());
    msg.insert(msg.end(), value.begin(), value.end());
  };
  append(wire::Op::Get, "p", 5000, "");
  append(wire::Op::Set, "q", 1, "v");
  append(wire::Op::Add, "n", 3, "");
  REQUIRE(net::send_all(fd.get(), msg.data(), msg.size(), Deadline::after(2s), "pipe").is_ok());
  // Nothing is answered while the GET is parked, not even the later SET.
  auto q = setter->get("q", Deadline::after(30ms));
  CHECK(q.status().code() == ErrorCode::Timeout);
  REQUIRE(setter->set("p", bytes("pv")).is_ok());

  std::array<std::uint8_t, wire::kResponseHeaderBytes> head{};
  auto read_head = [&] {
    REQUIRE(net::recv_all(fd.get(), head.data(), head.size(), Deadline::after(2s), "resp").is_ok());
    return wire::decode_response(head.data());
  };
  auto get_reply = read_head();
  CHECK(get_reply.reply == 0);
  REQUIRE(get_reply.arg == 2);
  std::array<char, 2> pv{};
  REQUIRE(net::recv_all(fd.get(), pv.data(), 2, Deadline::after(2s), "value").is_ok());
  CHECK(std::string(pv.data(), 2) == "pv");
  auto set_reply = read_head();
  CHECK(set_reply.reply == 0);
  auto add_reply = read_head();
  CHECK(add_reply.reply == 0);
  CHECK(add_reply.arg == 3);
  CHECK(text(setter->get("q", Deadline::after(2s)).value()) == "v");
}

TEST_CASE("bootstrap: tcp store survives a client that disconnects while parked") {
  auto server = start_server();
  auto good = connect_client(*server, 0);
  {
    net::Fd fd = raw_hello(*server);
    auto h =
        wire::encode_request({static_cast<std::uint8_t>(wire::Op::Get), 4, wire::kWaitForever});
    std::vector<std::uint8_t> msg(h.begin(), h.end());
    for (char c : std::string("gone")) msg.push_back(static_cast<std::uint8_t>(c));
    REQUIRE(net::send_all(fd.get(), msg.data(), msg.size(), Deadline::after(2s), "get").is_ok());
    // By now the GET is most likely parked; either way the server must cope with the close.
    CHECK(good->get("gone", Deadline::after(0ms)).status().code() == ErrorCode::Timeout);
  }  // closes the parked client
  CHECK(good->get("gone", Deadline::after(20ms)).status().code() == ErrorCode::Timeout);
  REQUIRE(good->set("gone", bytes("now")).is_ok());
  check_still_works(*good, "after-disconnect");
}

TEST_CASE("bootstrap: tcp store drops clients with the wrong secret, keeps serving the job") {
  loom::crypto::Secret secret{};
  secret[0] = 42;
  auto s = bs::TcpStoreServer::start(loopback_any_port(), kCommId, secret);
  REQUIRE(s.is_ok());
  auto& server = *s.value();
  auto good =
      bs::TcpStoreClient::connect(server.address(), kCommId, 0, Deadline::after(5s), secret);
  REQUIRE(good.is_ok());
  REQUIRE(good.value()->set("before", bytes("1")).is_ok());
  // A client with another secret is rejected before it can read or write anything.
  auto bad = bs::TcpStoreClient::connect(server.address(), kCommId, 1, Deadline::after(2s));
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().code() == ErrorCode::PeerFailed);
  // So is a hand-made hello with a forged proof, and plain garbage.
  loom::crypto::Secret wrong{};
  wrong[0] = 43;
  net::Fd forged = raw_hello_unchecked(server, wrong);
  CHECK(server_drops(forged.get()));
  auto junk_fd = net::connect_with_retry(server.address(), Deadline::after(2s));
  REQUIRE(junk_fd.is_ok());
  std::vector<std::uint8_t> junk(200, 0xab);
  (void)net::send_all(junk_fd.value().get(), junk.data(), junk.size(), Deadline::after(2s), "junk");
  CHECK(server_drops(junk_fd.value().get()));
  check_still_works(*good.value(), "after the intruders");
}
