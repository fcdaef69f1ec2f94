// Reliability: abort, failure sharing between ranks, hang attribution, split and shrink
// (threads as ranks; tests/process/fault_tolerance.sh covers killed processes).
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <latch>
#include <mutex>
#include <numeric>
#include <thread>

#include "comm_harness.hpp"
#include "common/process.hpp"
#include "core/failure_monitor.hpp"
#include "eventually.hpp"
#include "transports/tcp/tcp_transport.hpp"

using namespace loom;
using Catch::Matchers::Contains;
using loom::test::catch_error;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

using loom::test::eventually;

TEST_CASE("reliability: record codecs reject garbage and round trip", "[reliability]") {
  using namespace loom::detail;
  FailureRecord r{ErrorCode::PeerFailed, 3, 1, "rank 3 closed\nthe connection"};
  auto back = decode_failure(encode_failure(r), 4);
  REQUIRE(back);
  CHECK(back->rank == 3);
  CHECK(back->reporter == 1);
  CHECK(back->message == r.message);
  CHECK_FALSE(decode_failure(encode_failure(r), 3));  // rank out of range
  for (const char* bad : {"", "5", "5 1 2", "x 1 2\n", "5 -1 0\n", "5 1 99\n", "1 1 1\n", "5 1 1",
                          "99999999999999999999 1 1\n"})
    CHECK_FALSE(decode_failure(bad, 4));
  RankProgress p{42, 41, 42, "allreduce #42 (16 x float, sum)"};
  auto q = decode_progress(encode_progress(p));
  REQUIRE(q);
  CHECK(q->submitted == 42);
  CHECK(q->completed == 41);
  CHECK(q->current == p.current);
  CHECK_FALSE(decode_progress("1 2\nx"));
  CHECK_FALSE(decode_progress("-5 0 0\n"));
  CHECK(format_rank_ranges({0, 1, 2, 4, 5, 6, 7}) == "0-2,4-7");
  CHECK(format_rank_ranges({3}) == "3");
  CHECK(format_rank_ranges({1, 3, 5}) == "1,3,5");
}

TEST_CASE("reliability: the hang report names the ranks that lag", "[reliability]") {
  using namespace loom::detail;
  std::vector<RankIdentity> who(8, RankIdentity{"h0", "b", 100, 1});
  who[3] = RankIdentity{"h1", "c", 1234, 1};
  std::vector<std::optional<RankProgress>> answers(8, RankProgress{42, 41, 42, ""});
  answers[3] = RankProgress{41, 41, -1, ""};
  std::string report = hang_report(42, "allreduce #42 (16 MiB fp32)", answers, who);
  CHECK(report ==
        "allreduce #42 (16 MiB fp32) timed out: ranks 0-2,4-7 reached #42; rank 3 last "
        "completed #41 (host h1, pid 1234)");
  answers[5].reset();
  report = hang_report(42, "x", answers, who);
  CHECK_THAT(report, Contains("ranks 0-2,4,6-7 reached #42") &&
                         Contains("rank 5 did not answer (host h0, pid 100)"));
}

TEST_CASE("reliability: abort() during a transfer returns within 1 s and fails the operation",
          "[reliability]") {
  for (const char* transports : {"tcp", "shm"}) {
    DYNAMIC_SECTION(transports) {
      std::latch aborted(1);
      loom::test::run_ranks(
          2,
          [&](Communicator& comm) {
            if (comm.rank() == 1) {  // never calls: rank 0's operation stays in flight
              aborted.wait();
              return;
            }
            std::vector<float> buf(8 << 20, 1.0f);
            Work w = comm.allreduce(std::span<float>(buf), RedOp::Sum);
            CHECK_FALSE(w.test());
            auto t0 = Clock::now();
            comm.abort();
            auto took = Clock::now() - t0;
            aborted.count_down();
            CHECK(took < milliseconds(1000));
            auto e = catch_error([&] { w.wait(milliseconds(2000)); });
            CHECK(e.code() == ErrorCode::Aborted);
            auto later = catch_error([&] { comm.allreduce(std::span<float>(buf), RedOp::Sum); });
            CHECK(later.code() == ErrorCode::Aborted);
            auto err = comm.async_error();
            REQUIRE(err);
            CHECK(err->code() == ErrorCode::Aborted);
            comm.abort();  // idempotent
          },
          {{"LOOM_TRANSPORTS", transports}, {"LOOM_TIMEOUT", "30s"}});
    }
  }
}

TEST_CASE("reliability: a healthy communicator reports no error and its progress",
          "[reliability]") {
  loom::test::run_ranks(3, [](Communicator& comm) {
    std::vector<int> buf(10, 1);
    comm.allreduce(std::span<int>(buf), RedOp::Sum).wait();
    CHECK_FALSE(comm.async_error());
    CHECK(comm.failed_ranks().empty());
    CHECK_THAT(comm.status(), Contains("last submitted #0, last completed #0"));
  });
}

TEST_CASE("reliability: a rank that leaves is reported to every rank, which shrink past it",
          "[reliability]") {
  // The ring meets the leaver on connections made at init; the tree also connects to it lazily
  // (over shm: a wait for its channel, which ends as soon as the failure monitor knows).
  const std::vector<std::pair<const char*, const char*>> cases = {
      {"tcp", "ring"}, {"shm", "ring"}, {"shm", "tree"}};
  for (const auto& [transports, algo] : cases) {
    DYNAMIC_SECTION(transports << ", " << algo) {
      loom::test::run_ranks(
          4,
          [&](Communicator& comm) {
            std::vector<std::int64_t> buf(1 << 16);
            if (comm.rank() == 2) return;  // leaves: its connections close
            std::iota(buf.begin(), buf.end(), comm.rank());
            auto e = catch_error(
                [&] { comm.allreduce(std::span<std::int64_t>(buf), RedOp::Sum).wait(); });
            CHECK(e.code() == ErrorCode::PeerFailed);
            CHECK_THAT(e.what(), Contains("rank 2"));
            CHECK(comm.failed_ranks() == std::vector<int>{2});
            CHECK(comm.async_error());
            Communicator small = comm.shrink({2});
            CHECK(small.size() == 3);
            CHECK(small.rank() == (comm.rank() < 2 ? comm.rank() : comm.rank() - 1));
            std::iota(buf.begin(), buf.end(), comm.rank());
            small.allreduce(std::span<std::int64_t>(buf), RedOp::Sum).wait();
            for (std::size_t i = 0; i < buf.size(); ++i)
              REQUIRE(buf[i] == 3 * static_cast<std::int64_t>(i) + 0 + 1 + 3);
          },
          {{"LOOM_TRANSPORTS", transports}, {"LOOM_ALGO", algo}, {"LOOM_TIMEOUT", "30s"}});
    }
  }
}

TEST_CASE("reliability: split by color orders ranks by key", "[reliability]") {
  loom::test::run_ranks(5, [](Communicator& comm) {
    int color = comm.rank() % 2;
    Communicator sub = comm.split(color, -comm.rank());
    REQUIRE(sub.valid());
    CHECK(sub.size() == (color == 0 ? 3 : 2));
    // Keys are -rank: the highest old rank comes first.
    int expect = color == 0 ? (4 - comm.rank()) / 2 : (3 - comm.rank()) / 2;
    CHECK(sub.rank() == expect);
    std::vector<int> v(1000, comm.rank());
    sub.allreduce(std::span<int>(v), RedOp::Sum).wait();
    int want = color == 0 ? 0 + 2 + 4 : 1 + 3;
    for (int x : v) REQUIRE(x == want);
    Communicator none = comm.split(comm.rank() == 0 ? -1 : 7, 0);
    CHECK(none.valid() == (comm.rank() != 0));
    if (none.valid()) CHECK(none.size() == 4);
    // The parent still works.
    comm.allreduce(std::span<int>(v), RedOp::Max).wait();
  });
}

TEST_CASE("reliability: finished communicators leave no keys in the store", "[reliability]") {
  // Repeated split + destroy must not grow the store (each split used to leave ~10 KB on rank
  // 0's store for good); once every rank destroyed the parent, nothing of it remains.
  auto store = std::make_shared<bootstrap::InMemoryStore>();
  constexpr int kRanks = 4;
  constexpr int kRounds = 12;
  std::vector<std::size_t> sizes(kRounds);
  loom::test::on_rank_threads(kRanks, [&](int r) {
    Communicator comm = loom::test::make_comm(store, r, kRanks, 0x5107e, {{"LOOM_TIMEOUT", "60s"}});
    std::vector<int> v(64, 1);
    for (int i = 0; i < kRounds; ++i) {
      {
        Communicator sub = comm.split(comm.rank() % 2, comm.rank());
        sub.allreduce(std::span<int>(v), RedOp::Max).wait();
      }
      comm.allreduce(std::span<int>(v), RedOp::Max).wait();  // every child is gone by now
      if (r == 0) sizes[static_cast<std::size_t>(i)] = store->size();
      comm.allreduce(std::span<int>(v), RedOp::Max).wait();
    }
  });
  CAPTURE(sizes);
  CHECK(sizes[kRounds - 1] == sizes[2]);
  CHECK(store->size() == 0);
}

TEST_CASE("reliability: a timeout logs a report naming the rank that stopped calling",
          "[reliability]") {
  std::latch done(3);
  loom::test::EndTogether::Shared all_reported;
  loom::test::run_ranks(
      4,
      [&](Communicator& comm) {
        std::vector<float> buf(1000, 1.0f);
        comm.allreduce(std::span<float>(buf), RedOp::Sum).wait();  // #0: everyone
        if (comm.rank() == 2) {                                    // stops calling, stays alive
          done.wait();
          return;
        }
        // The ranks that time out stay until all three have their reports: a rank that left
        // early would rightly be reported as not answering.
        const loom::test::EndTogether together(all_reported, 3);
        auto e = catch_error([&] { comm.allreduce(std::span<float>(buf), RedOp::Sum).wait(); });
        CHECK(e.code() == ErrorCode::Timeout);
        bool reported =
            eventually([&] { return comm.status().find("last timeout") != std::string::npos; });
        done.count_down();
        REQUIRE(reported);
        std::string status = comm.status();
        CHECK_THAT(status, Contains("allreduce #1") && Contains("ranks 0-1,3 reached #1") &&
                               Contains("rank 2 last completed #0 (host "));
      },
      {{"LOOM_TIMEOUT", "1s"}});
}

namespace {
// tcp options with one socket per peer and a job secret whose byte `at` is `value` (others 0).
loom::transport::tcp::TcpOptions tcp_secret_options(std::size_t at, std::uint8_t value) {
  loom::transport::tcp::TcpOptions o;
  o.sockets_per_peer = 1;
  o.secret[at] = value;
  return o;
}
}  // namespace

TEST_CASE("reliability: a tcp connection with the wrong secret is dropped, the job goes on",
          "[reliability]") {
  namespace tcp = loom::transport::tcp;
  auto bind = net::resolve("127.0.0.1");
  REQUIRE(bind.is_ok());
  const tcp::TcpOptions good = tcp_secret_options(3, 7);
  const tcp::TcpOptions bad = tcp_secret_options(3, 8);
  constexpr std::uint64_t kComm = 0xfeed;
  auto r0 = tcp::TcpTransport::listen(0, 2, kComm, *bind, good);
  auto r1 = tcp::TcpTransport::listen(1, 2, kComm, *bind, good);
  auto intruder = tcp::TcpTransport::listen(0, 2, kComm, *bind, bad);
  REQUIRE((r0.is_ok() && r1.is_ok() && intruder.is_ok()));
  std::vector<net::SocketAddress> addrs{r0.value()->address(), r1.value()->address()};
  for (auto* t : {&r0, &r1, &intruder}) t->value()->set_peer_addresses(addrs);
  // Rank 1 accepts; the intruder connects first (the acceptor drops it without answering, so
  // the intruder's handshake fails too), then the real rank 0.
  Status accepted;
  std::thread t1([&] { accepted = r1.value()->ensure({0}, Deadline::after(milliseconds(20000))); });
  Status in = intruder.value()->ensure({1}, Deadline::after(milliseconds(10000)));
  CHECK(in.code() == ErrorCode::PeerFailed);
  CHECK_THAT(in.message(), Contains("rank 1") && Contains("did not accept our hello"));
  Status connected = r0.value()->ensure({1}, Deadline::after(milliseconds(20000)));
  t1.join();
  REQUIRE(connected.is_ok());
  INFO(accepted.message());
  REQUIRE(accepted.is_ok());
  // The accepted connection is rank 0's: a message goes through.
  std::vector<std::uint8_t> src(1000, 5), dst(1000, 0);
  transport::Tag tag{};
  auto* c0 = r0.value()->get(1);
  auto* c1 = r1.value()->get(0);
  auto rq = c1->irecv({dst.data(), dst.size()}, 0, dst.size(), tag);
  auto sq = c0->isend({src.data(), src.size()}, 0, src.size(), tag);
  REQUIRE((rq.is_ok() && sq.is_ok()));
  bool rdone = false, sdone = false;
  auto until = Clock::now() + milliseconds(10000);
  while (!(rdone && sdone) && Clock::now() < until) {
    if (!sdone) {
      auto r = c0->test(*sq);
      REQUIRE(r.is_ok());
      sdone = *r;
    }
    if (!rdone) {
      auto r = c1->test(*rq);
      REQUIRE(r.is_ok());
      rdone = *r;
    }
  }
  REQUIRE(rdone);
  CHECK(dst == src);
}

// The other direction: a listener at a peer's address that does not hold the secret (it answers
// the hello with a forged proof) is refused by the connecting rank before any data moves.
TEST_CASE("reliability: a tcp acceptor that cannot prove the secret is refused", "[reliability]") {
  namespace tcp = loom::transport::tcp;
  auto bind = net::resolve("127.0.0.1");
  REQUIRE(bind.is_ok());
  const tcp::TcpOptions opts = tcp_secret_options(0, 42);
  auto r0 = tcp::TcpTransport::listen(0, 2, 0xbeef, *bind, opts);
  REQUIRE(r0.is_ok());
  auto fake = net::listen_on(*bind);
  REQUIRE(fake.is_ok());
  auto fake_addr = net::bound_address(fake->get());
  REQUIRE(fake_addr.is_ok());
  r0.value()->set_peer_addresses({r0.value()->address(), *fake_addr});
  std::thread rogue([&] {
    auto fd = net::accept_until(fake->get(), Deadline::after(milliseconds(10000)));
    if (!fd.is_ok()) return;
    const Deadline d = Deadline::after(milliseconds(10000));
    std::array<std::uint8_t, 16> challenge{};
    std::array<std::uint8_t, sizeof(tcp::Hello) + 32 + 16> hello{};
    std::array<std::uint8_t, 32> forged{};
    forged.fill(0xab);
    (void)net::send_all(fd->get(), challenge.data(), challenge.size(), d, "challenge");
    (void)net::recv_all(fd->get(), hello.data(), hello.size(), d, "hello");
    (void)net::send_all(fd->get(), forged.data(), forged.size(), d, "forged answer");
  });
  Status st = r0.value()->ensure({1}, Deadline::after(milliseconds(10000)));
  rogue.join();
  CHECK(st.code() == ErrorCode::PeerFailed);
  CHECK_THAT(st.message(), Contains("failed to prove the job's secret") && Contains("rank 1"));
  CHECK(r0.value()->get(1) == nullptr);
}

namespace {

// A TCP port that was free a moment ago (for a rank-0-served rendezvous).
int free_tcp_port() {
  auto a = net::resolve("127.0.0.1:0");
  REQUIRE(a.is_ok());
  auto fd = net::listen_on(a.value());
  REQUIRE(fd.is_ok());
  auto bound = net::bound_address(fd.value().get());
  REQUIRE(bound.is_ok());
  return bound.value().port();
}

}  // namespace

TEST_CASE("reliability: shrink without the rank that served the store re-roots it",
          "[reliability]") {
  // Rank 0 serves the rendezvous store (as under loomrun) and leaves; the others shrink past it
  // onto rank 1's standby store, twice (the shrunk communicator has standbys of its own). (A
  // kill -9 of the store's host, detected by every survivor, is tests/process/fault_tolerance.sh.)
  // The store is served by rank 0's communicator (loomrun, from_env) or by UniqueId::create() in
  // this process (which also runs rank 0: the lowest such rank is the store's host).
  const bool created = GENERATE(false, true);
  CAPTURE(created);
  const UniqueId id = created ? UniqueId::create("127.0.0.1")
                              : UniqueId::for_root(fmt::format("127.0.0.1:{}", free_tcp_port()),
                                                   "00112233445566778899aabbccddeeff");
  CommOptions opts;
  opts.timeout = milliseconds(30'000);
  opts.settings = {{"LOOM_TRANSPORTS", "tcp"}};
  std::vector<std::thread> threads;
  std::mutex mu;
  std::vector<std::string> errors;
  // No Catch assertions on the rank threads: failures are collected and reported at the end.
  auto expect = [](bool ok, const char* what) {
    if (!ok) throw std::runtime_error(std::string("expected: ") + what);
  };
  // Leaving (destroying the communicators) must not wait for the 30 s timeout: ranks that share
  // this process's store server must not wait for each other, nor for a store already gone.
  std::vector<Clock::duration> leaving(4);
  for (int r = 0; r < 4; ++r)
    threads.emplace_back([&, r] {
      Clock::time_point done;
      auto run = [&] {
        Communicator comm(id, r, 4, opts);
        std::vector<std::int64_t> buf(1 << 12, r);
        comm.allreduce(std::span<std::int64_t>(buf), RedOp::Sum).wait();
        for (std::int64_t x : buf) expect(x == 0 + 1 + 2 + 3, "exact sum on 4 ranks");
        if (r == 0) return void(done = Clock::now());  // leaves, taking the store with it
        Communicator small = comm.shrink({0});
        expect(small.size() == 3 && small.rank() == r - 1, "shrunk to 3 ranks");
        std::iota(buf.begin(), buf.end(), r);
        small.allreduce(std::span<std::int64_t>(buf), RedOp::Sum).wait();
        for (std::size_t i = 0; i < buf.size(); ++i)
          expect(buf[i] == 3 * static_cast<std::int64_t>(i) + 1 + 2 + 3, "exact sum on 3 ranks");
        if (small.rank() == 0) return void(done = Clock::now());  // the new store's host leaves too
        Communicator smaller = small.shrink({0});
        expect(smaller.size() == 2, "shrunk to 2 ranks");
        std::vector<int> v(100, r);
        smaller.allreduce(std::span<int>(v), RedOp::Sum).wait();
        for (int x : v) expect(x == 2 + 3, "exact sum on 2 ranks");
        done = Clock::now();
      };
      try {
        run();
        leaving[static_cast<std::size_t>(r)] = Clock::now() - done;
      } catch (const std::exception& e) {
        std::lock_guard lk(mu);
        errors.push_back(fmt::format("rank {}: {}", r, e.what()));
      }
    });
  for (auto& t : threads) t.join();
  for (const auto& e : errors) FAIL(e);
  for (int r = 0; r < 4; ++r) {
    CAPTURE(r);
    CHECK(leaving[static_cast<std::size_t>(r)] < milliseconds(10'000));
  }
}

namespace {

// A store whose server can vanish, cleanly (it said Closing) or not (its process died).
class VanishingStore final : public bootstrap::Store {
 public:
  explicit VanishingStore(bool lost) : lost_(lost) {}
  void vanish() { gone_ = true; }
  [[nodiscard]] int calls_after_gone() const { return after_.load(); }
  Status set(const std::string& /*key*/, std::span<const std::uint8_t> /*value*/) override {
    return answer();
  }
  Result<bootstrap::Bytes> get(const std::string& key, Deadline /*deadline*/) override {
    LOOM_RETURN_IF_ERROR(answer());
    return Status(ErrorCode::Timeout, "no " + key);
  }
  Result<std::int64_t> add(const std::string& /*key*/, std::int64_t delta) override {
    LOOM_RETURN_IF_ERROR(answer());
    return delta;
  }
  Result<std::int64_t> erase_prefix(const std::string& /*prefix*/) override {
    LOOM_RETURN_IF_ERROR(answer());
    return 0;
  }
  [[nodiscard]] bool server_lost() const override { return gone_ && lost_; }

 private:
  Status answer() {
    if (!gone_) return Status::ok();
    ++after_;
    return {ErrorCode::PeerFailed, "rendezvous server at 10.0.0.1:29500 closed the connection"};
  }
  bool lost_;
  std::atomic<bool> gone_{false};
  std::atomic<int> after_{0};
};

}  // namespace

namespace {

// A store whose server's process is stopped (SIGSTOP): nothing answers. Calls with a deadline
// time out at it (gets a second after, like the TCP client's grace); set() and add() without one
// would wait for the operation timeout (here 30 s).
class FrozenStore final : public bootstrap::Store {
 public:
  Status set(const std::string& key, std::span<const std::uint8_t> value) override {
    return set_by(key, value, Deadline::after(std::chrono::seconds(30)));
  }
  Status set_by(const std::string& key, std::span<const std::uint8_t> /*value*/,
                Deadline d) override {
    return freeze(key, d);
  }
  Result<bootstrap::Bytes> get(const std::string& key, Deadline d) override {
    return freeze(key, Deadline(d.at() + std::chrono::seconds(1)));
  }
  Result<std::int64_t> add(const std::string& key, std::int64_t delta) override {
    return add_by(key, delta, Deadline::after(std::chrono::seconds(30)));
  }
  Result<std::int64_t> add_by(const std::string& key, std::int64_t /*delta*/, Deadline d) override {
    return freeze(key, d);
  }
  Result<std::int64_t> erase_prefix(const std::string& key) override {
    return freeze(key, Deadline::after(std::chrono::seconds(30)));
  }
  Result<std::vector<bootstrap::GoneClient>> gone(Deadline d) override { return freeze("-", d); }
  void thaw() {
    std::lock_guard lk(mu_);
    thawed_ = true;
    cv_.notify_all();
  }

 private:
  Status freeze(const std::string& key, Deadline d) {
    std::unique_lock lk(mu_);
    cv_.wait_until(lk, d.at(), [&] { return thawed_; });
    return {ErrorCode::Timeout, "no answer for " + key};
  }
  std::mutex mu_;
  std::condition_variable cv_;
  bool thawed_ = false;
};

}  // namespace

TEST_CASE("reliability: with the store's host stopped, the hang report says so within seconds",
          "[reliability]") {
  using namespace loom::detail;
  auto store = std::make_shared<FrozenStore>();
  std::vector<RankIdentity> ids(4);
  for (int r = 0; r < 4; ++r)
    ids[static_cast<std::size_t>(r)] = {
        fmt::format("h{}", r), fmt::format("boot{}", r), ::getpid(), 0, r == 0, ""};
  FailureMonitor::Hooks hooks;
  hooks.fail = [](const Status&) {};
  hooks.progress = [] { return RankProgress{7, 6, 7, "allreduce #7 (4 x float, sum)"}; };
  FailureMonitor monitor(store, "t/", 2, ids, hooks, /*store_host=*/0);
  std::this_thread::sleep_for(milliseconds(300));  // the monitor is inside its slow looks
  const auto timed_out = Clock::now();
  (void)monitor.local_failure(Status(ErrorCode::Timeout, "allreduce #7 timed out"));
  REQUIRE(eventually([&] { return !monitor.last_report().empty(); }, milliseconds(10000)));
  const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - timed_out);
  CHECK(took < milliseconds(3500));
  CHECK_THAT(monitor.last_report(), Contains("allreduce #7 (4 x float, sum) timed out"));
  CHECK_THAT(monitor.last_report(), Contains("the rendezvous store (served by rank 0 (host h0"));
  CHECK_THAT(monitor.last_report(), Contains("did not answer within 2000 ms"));
  CHECK_THAT(monitor.last_report(), !Contains("rank 1 did not answer"));
  store->thaw();
  monitor.stop_now();
}

TEST_CASE("reliability: a store that vanishes without a shutdown fails the rank that served it",
          "[reliability]") {
  using namespace loom::detail;
  const bool lost = GENERATE(true, false);
  CAPTURE(lost);
  auto store = std::make_shared<VanishingStore>(lost);
  // Three ranks on other "hosts" (this process's pid: no pid watching); rank 0 serves the store.
  std::vector<RankIdentity> ids(3);
  for (int r = 0; r < 3; ++r)
    ids[static_cast<std::size_t>(r)] = {
        fmt::format("h{}", r), fmt::format("boot{}", r), ::getpid(), 0, r == 0, ""};
  std::mutex mu;
  std::vector<Status> failures;
  FailureMonitor::Hooks hooks;
  hooks.fail = [&](const Status& s) {
    std::lock_guard lk(mu);
    failures.push_back(s);
  };
  hooks.progress = [] { return RankProgress{}; };
  FailureMonitor monitor(store, "t/", 2, ids, hooks, /*store_host=*/0);
  store->vanish();
  if (lost) {
    REQUIRE(eventually([&] { return !monitor.first_failure().is_ok(); }, milliseconds(2000)));
    Status st = monitor.first_failure();
    CHECK(st.code() == ErrorCode::PeerFailed);
    CHECK(st.peer() == 0);
    CHECK_THAT(st.message(), Contains("peer rank 0 (host h0, pid"));
    CHECK_THAT(st.message(), Contains("the rendezvous store it served went away"));
    CHECK(monitor.failed_ranks() == std::vector<int>{0});
    // The hook runs just after the failure is recorded.
    CHECK(eventually(
        [&] {
          std::lock_guard lk(mu);
          return failures.size() == 1;
        },
        milliseconds(2000)));
    monitor.stop();
    std::lock_guard lk(mu);
    CHECK(failures.size() == 1);
    CHECK(failures[0].peer() == 0);
  } else {
    // The monitor noticed (it called the store after it was gone) and reported nothing.
    REQUIRE(eventually([&] { return store->calls_after_gone() > 0; }, milliseconds(2000)));
    monitor.stop();
    CHECK(monitor.first_failure().is_ok());
    CHECK(monitor.failed_ranks().empty());
    std::lock_guard lk(mu);
    CHECK(failures.empty());
  }
}

namespace {

// A child process that waits for a signal: a peer process on this host for failure monitors.
pid_t paused_child() {
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  return child;
}

// Rank 0 is `child` and rank 1 this process, both on host h0; then `remote` ranks on host h1.
std::vector<loom::detail::RankIdentity> ranks_with_child(pid_t child, int remote) {
  const std::uint64_t ns = proc::own_pid_namespace();
  std::vector<loom::detail::RankIdentity> ids = {{"h0", "boot0", child, ns, false, ""},
                                                 {"h0", "boot0", ::getpid(), ns, false, ""}};
  for (int i = 0; i < remote; ++i) ids.push_back({"h1", "boot1", ::getpid(), 0, false, ""});
  return ids;
}

loom::detail::FailureMonitor::Hooks quiet_hooks() {
  loom::detail::FailureMonitor::Hooks hooks;
  hooks.fail = [](const Status&) {};
  hooks.progress = [] { return loom::detail::RankProgress{}; };
  return hooks;
}

}  // namespace

TEST_CASE(
    "reliability: a same-host peer that exits after posting another rank's failure is not "
    "blamed for it",
    "[reliability]") {
  using namespace loom::detail;
  // Rank 0 (a child process on this host) saw rank 3 fail, posted the record, and exited; rank 1
  // (this monitor) notices both between two of its loops. The first failure must name rank 3.
  const pid_t child = paused_child();
  auto store = std::make_shared<bootstrap::InMemoryStore>();
  FailureMonitor monitor(store, "t/", 1, ranks_with_child(child, 2), quiet_hooks(),
                         /*store_host=*/-1);
  auto n = store->add("t/failure/count", 1);
  REQUIRE(n.is_ok());
  const std::string rec = encode_failure({ErrorCode::PeerFailed, 3, 0, "process 4321 exited"});
  REQUIRE(store
              ->set("t/failure/" + std::to_string(*n),
                    {reinterpret_cast<const std::uint8_t*>(rec.data()), rec.size()})
              .is_ok());
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  REQUIRE(eventually([&] { return monitor.failed_ranks().size() == 2; }, milliseconds(5000)));
  CHECK(monitor.failed_ranks() == std::vector<int>{0, 3});
  Status first = monitor.first_failure();
  INFO(first.message());
  CHECK(first.code() == ErrorCode::PeerFailed);
  CHECK(first.peer() == 3);
  CHECK_THAT(first.message(), Contains("peer rank 3 (host h1"));
  // This rank's own operation that then fails on its connection to rank 0 names both.
  Status own = monitor.local_failure(
      Status(ErrorCode::PeerFailed, "rank 1 <-> rank 0 (shm): rank 0 exited").with_peer(0));
  CHECK(own.peer() == 0);
  CHECK_THAT(own.message(), Contains("rank 0 exited") && Contains("[rank 0 runs on host h0") &&
                                Contains("[after rank 1: peer rank 3 (host h1"));
  monitor.stop();
}

TEST_CASE("reliability: a report that a same-host peer's process exited while it runs is ignored",
          "[reliability]") {
  using namespace loom::detail;
  // Rank 0 is a live child process on this host; a record (a forged one, or a confused rank's)
  // says its process exited. This rank can see it runs: the record must not make it "failed".
  const pid_t child = paused_child();
  auto store = std::make_shared<bootstrap::InMemoryStore>();
  FailureMonitor monitor(store, "t/", 1, ranks_with_child(child, 1), quiet_hooks(),
                         /*store_host=*/-1);
  auto post = [&](const FailureRecord& r) {
    auto n = store->add("t/failure/count", 1);
    REQUIRE(n.is_ok());
    const std::string rec = encode_failure(r);
    REQUIRE(store
                ->set("t/failure/" + std::to_string(*n),
                      {reinterpret_cast<const std::uint8_t*>(rec.data()), rec.size()})
                .is_ok());
  };
  post({ErrorCode::PeerFailed, 0, 2, fmt::format("process {} exited", child)});
  // A later true record (rank 2 reports its own lost connection to rank 0) still applies: the
  // monitor has read the forged one by then.
  std::this_thread::sleep_for(milliseconds(400));
  CHECK(monitor.failed_ranks().empty());
  CHECK(monitor.first_failure().is_ok());
  post({ErrorCode::PeerFailed, 0, 2, "connection reset"});
  REQUIRE(eventually([&] { return !monitor.first_failure().is_ok(); }, milliseconds(3000)));
  CHECK(monitor.failed_ranks() == std::vector<int>{0});
  monitor.stop();
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
}
