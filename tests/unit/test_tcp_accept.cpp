// The tcp data listener's handshakes (transports/tcp/tcp_accept.*): many at once, each with its
// own deadline, so that idle, slow or garbage connections never delay a real peer's; a bounded
// number of unauthenticated connections; and the exchange itself, byte by byte.
#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <latch>
#include <mutex>
#include <thread>

#include "comm_harness.hpp"
#include "transports/tcp/tcp_accept.hpp"
#include "transports/tcp/tcp_transport.hpp"

using namespace loom;
namespace tcp = loom::transport::tcp;
using Catch::Matchers::Contains;
using std::chrono::milliseconds;

namespace {

// Connections that a foreign process opens to a listener: some idle (connected, silent), some
// sending garbage one byte at a time, slowly. Closed on destruction.
class Intruders {
 public:
  ~Intruders() {
    stop_ = true;
    if (dripper_.joinable()) dripper_.join();
  }
  void open(const net::SocketAddress& at, int idle, int slow) {
    for (int i = 0; i < idle + slow; ++i) {
      auto fd = net::connect_with_retry(at, Deadline::after(milliseconds(5000)));
      REQUIRE(fd.is_ok());
      std::lock_guard lk(mu_);
      (i < idle ? idle_ : slow_).push_back(std::move(fd).value());
    }
  }
  // Starts writing one garbage byte every 100 ms on each slow connection.
  void drip() {
    dripper_ = std::thread([this] {
      while (!stop_) {
        {
          std::lock_guard lk(mu_);
          for (auto& fd : slow_) (void)::send(fd.get(), "?", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        }
        std::this_thread::sleep_for(milliseconds(100));
      }
    });
  }
  // How many idle connections the other side has closed (EOF or reset waiting).
  int closed_by_peer() {
    std::lock_guard lk(mu_);
    int n = 0;
    for (auto& fd : idle_) {
      pollfd p{fd.get(), POLLIN, 0};
      if (::poll(&p, 1, 0) != 1) continue;
      char buf[64];
      ssize_t got = 0;
      // The acceptor's challenge comes first; EOF (0) or an error after it means closed.
      while ((got = ::recv(fd.get(), buf, sizeof buf, MSG_DONTWAIT)) > 0) {
      }
      if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) ++n;
    }
    return n;
  }

 private:
  std::mutex mu_;
  std::vector<net::Fd> idle_, slow_;
  std::atomic<bool> stop_{false};
  std::thread dripper_;
};

struct AcceptPair {
  std::unique_ptr<tcp::TcpTransport> t[2];
};

AcceptPair listen_pair(std::chrono::milliseconds hello_timeout) {
  auto bind = net::resolve("127.0.0.1");
  REQUIRE(bind.is_ok());
  tcp::TcpOptions o;
  o.sockets_per_peer = 2;
  o.progress_threads = 0;
  o.secret[5] = 9;
  o.hello_timeout = hello_timeout;
  AcceptPair p;
  for (int r = 0; r < 2; ++r) {
    auto t = tcp::TcpTransport::listen(r, 2, 0xace, *bind, o);
    REQUIRE(t.is_ok());
    p.t[r] = std::move(t).value();
  }
  std::vector<net::SocketAddress> addrs{p.t[0]->address(), p.t[1]->address()};
  for (auto& t : p.t) t->set_peer_addresses(addrs);
  return p;
}

// Connects rank 0 to rank 1 (rank 1 accepts), both within `limit`.
std::array<Status, 2> connect_pair(AcceptPair& p, milliseconds limit) {
  std::array<Status, 2> st;
  std::thread acceptor([&] { st[1] = p.t[1]->ensure({0}, Deadline::after(limit)); });
  st[0] = p.t[0]->ensure({1}, Deadline::after(limit));
  acceptor.join();
  return st;
}

}  // namespace

TEST_CASE("tcp accept: idle and slow foreign connections do not delay a peer", "[tcp][hello]") {
  // Before the peer connects, rank 1's listener holds idle connections and garbage ones that
  // dribble a byte at a time: they sit first in its accept queue. Handshakes run concurrently,
  // so the peer connects at once, well before the foreign connections' own hello deadline.
  AcceptPair p = listen_pair(milliseconds(5000));
  Intruders in;
  in.open(p.t[1]->address(), 4, 2);
  in.drip();
  const auto start = Clock::now();
  auto st = connect_pair(p, milliseconds(3000));
  INFO(st[0].message() << " / " << st[1].message());
  REQUIRE(st[0].is_ok());
  REQUIRE(st[1].is_ok());
  CHECK(Clock::now() - start < milliseconds(2000));
  REQUIRE(p.t[1]->get(0) != nullptr);
}

TEST_CASE("tcp accept: a connection without a hello is dropped at its own deadline",
          "[tcp][hello]") {
  // Rank 1 waits for rank 0 (which comes late); the idle intruders are closed once their 300 ms
  // are up, while the wait for the peer goes on.
  AcceptPair p = listen_pair(milliseconds(300));
  Intruders in;
  in.open(p.t[1]->address(), 3, 0);
  Status accepted;
  std::thread acceptor(
      [&] { accepted = p.t[1]->ensure({0}, Deadline::after(milliseconds(5000))); });
  std::this_thread::sleep_for(milliseconds(1200));
  CHECK(in.closed_by_peer() == 3);
  Status connected = p.t[0]->ensure({1}, Deadline::after(milliseconds(5000)));
  acceptor.join();
  INFO(connected.message() << " / " << accepted.message());
  CHECK(connected.is_ok());
  CHECK(accepted.is_ok());
}

TEST_CASE("tcp accept: a flood of connections is bounded and the peer still connects",
          "[tcp][hello]") {
  // Far more silent connections than may wait unauthenticated: the oldest are closed, so the
  // process's descriptors stay bounded, and the peer's connection (the newest) goes through.
  AcceptPair p = listen_pair(milliseconds(5000));
  Intruders in;
  const int flood = static_cast<int>(tcp::kMaxPendingHellos) + 100;
  in.open(p.t[1]->address(), flood, 0);
  auto st = connect_pair(p, milliseconds(4000));
  INFO(st[0].message() << " / " << st[1].message());
  REQUIRE(st[0].is_ok());
  REQUIRE(st[1].is_ok());
  CHECK(in.closed_by_peer() >= 100);
}

TEST_CASE("tcp accept: the hello exchange, byte by byte", "[tcp][hello]") {
  tcp::HelloRules rules;
  rules.secret[0] = 1;
  rules.comm_id = 77;
  rules.rank = 3;
  const crypto::Nonce challenge = crypto::make_nonce();
  const crypto::Nonce theirs = crypto::make_nonce();
  auto hello_message = [&](tcp::Hello h, const crypto::Secret& secret) {
    std::array<std::uint8_t, tcp::kHelloMessageBytes> msg{};
    std::memcpy(msg.data(), &h, sizeof h);
    auto mac = crypto::prove(secret, tcp::kHelloDomain, challenge,
                             std::span<const std::uint8_t>(msg.data(), sizeof h));
    std::memcpy(msg.data() + sizeof h, mac.data(), mac.size());
    std::memcpy(msg.data() + sizeof h + mac.size(), theirs.data(), theirs.size());
    return msg;
  };
  tcp::Hello good;
  good.nsockets = 2;
  good.comm_id = 77;
  good.from_rank = 1;
  good.to_rank = 3;
  good.socket_index = 1;

  SECTION("a valid hello, fed one byte at a time, is answered with the proof") {
    tcp::HelloExchange ex(challenge);
    CHECK(ex.output().size() == challenge.size());
    ex.wrote(5);
    ex.wrote(challenge.size());  // the rest
    CHECK(ex.output().empty());
    auto msg = hello_message(good, rules.secret);
    for (std::size_t i = 0; i < msg.size(); ++i) {
      REQUIRE(ex.wants() == msg.size() - i);
      ex.read(std::span<const std::uint8_t>(&msg[i], 1), rules);
    }
    REQUIRE(ex.state() == tcp::HelloExchange::State::Verified);
    CHECK(ex.hello().from_rank == 1);
    ex.admit(true, rules);
    auto want = crypto::prove(rules.secret, tcp::kAcceptDomain, theirs,
                              std::span<const std::uint8_t>(msg.data(), sizeof good));
    auto out = ex.output();
    REQUIRE(out.size() == want.size());
    CHECK(std::equal(out.begin(), out.end(), want.begin()));
    ex.wrote(out.size());
    CHECK(ex.state() == tcp::HelloExchange::State::Done);
  }
  SECTION("bytes past the hello are not taken") {
    tcp::HelloExchange ex(challenge);
    auto msg = hello_message(good, rules.secret);
    std::vector<std::uint8_t> more(msg.begin(), msg.end());
    more.resize(more.size() + 10, 0xee);
    ex.read(more, rules);
    CHECK(ex.state() == tcp::HelloExchange::State::Verified);
    CHECK(ex.wants() == 0);
  }
  SECTION("the wrong secret fails before any field is looked at") {
    tcp::HelloExchange ex(challenge);
    crypto::Secret other = rules.secret;
    other[0] = 2;
    ex.read(hello_message(good, other), rules);
    CHECK(ex.state() == tcp::HelloExchange::State::Failed);
    CHECK_THAT(ex.failure(), Contains("failed authentication"));
    CHECK(ex.output().size() == challenge.size());  // no answer, only the unsent challenge
  }
  SECTION("a proven hello with bad fields fails, saying which") {
    auto expect = [&](tcp::Hello h, const char* why) {
      tcp::HelloExchange ex(challenge);
      ex.read(hello_message(h, rules.secret), rules);
      CHECK(ex.state() == tcp::HelloExchange::State::Failed);
      CHECK_THAT(ex.failure(), Contains(why));
    };
    tcp::Hello h = good;
    h.from_rank = 3;  // only lower ranks connect
    expect(h, "from rank 3 to rank 3");
    h = good;
    h.comm_id = 78;
    expect(h, "communicator");
    h = good;
    h.socket_index = 2;
    expect(h, "socket 2 of 2");
    h = good;
    h.nsockets = tcp::kMaxSockets + 1;
    h.socket_index = 0;
    expect(h, "of 17");
    h = good;
    h.version = 3;
    expect(h, "version 3");
  }
  SECTION("a refused hello is not answered") {
    tcp::HelloExchange ex(challenge);
    ex.wrote(challenge.size());
    ex.read(hello_message(good, rules.secret), rules);
    ex.admit(false, rules, "disagrees");
    CHECK(ex.state() == tcp::HelloExchange::State::Failed);
    CHECK(ex.failure() == "disagrees");
    CHECK(ex.output().empty());
  }
}

TEST_CASE("tcp accept: foreign connections made before lazy connections do not fail the job",
          "[tcp][hello][reliability]") {
  // Threads as ranks over tcp with the tree forced: non-neighbours connect at their first
  // collective. Before that, every rank's data listener gets idle and garbage-dribbling
  // connections; the collectives must still finish well within a short LOOM_TIMEOUT, exactly,
  // with no rank marked failed.
  constexpr int n = 6;
  auto store = std::make_shared<bootstrap::InMemoryStore>();
  const std::uint64_t comm_id = 0x5eed0000ull + static_cast<std::uint64_t>(::getpid());
  const std::map<std::string, std::string> settings = {
      {"LOOM_TRANSPORTS", "tcp"}, {"LOOM_ALGO", "tree"}, {"LOOM_TIMEOUT", "6s"}};
  std::latch ready(n), go(1);
  std::mutex mu;
  std::vector<std::string> errors;
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; ++r)
    ranks.emplace_back([&, r] {
      bool counted = false;
      try {
        Communicator comm = test::make_comm(store, r, n, comm_id, settings);
        ready.count_down();
        counted = true;
        go.wait();
        for (int round = 0; round < 3; ++round) {
          std::vector<std::int64_t> buf(1000, r + round);
          comm.allreduce(std::span<std::int64_t>(buf), RedOp::Sum).wait();
          const std::int64_t want = n * (n - 1) / 2 + n * round;
          for (std::int64_t x : buf)
            if (x != want) throw std::runtime_error("inexact allreduce result");
          std::vector<std::int32_t> b(500, comm.rank() == 2 ? 42 + round : -1);
          comm.broadcast(std::span<std::int32_t>(b), 2).wait();
          for (std::int32_t x : b)
            if (x != 42 + round) throw std::runtime_error("inexact broadcast result");
        }
        if (!comm.failed_ranks().empty()) throw std::runtime_error("a rank was marked failed");
      } catch (const std::exception& e) {
        std::lock_guard lk(mu);
        errors.push_back("rank " + std::to_string(r) + ": " + e.what());
        if (!counted) ready.count_down();
      }
    });
  // The store holds every rank's card, which starts with its data listener's address.
  ready.wait();
  Intruders in;
  for (int r = 0; r < n && errors.empty(); ++r) {
    auto card = store->get(fmt::format("loom/{:016x}/card/{}", comm_id, r),
                           Deadline::after(milliseconds(1000)));
    REQUIRE(card.is_ok());
    net::SocketAddress addr;
    REQUIRE(card->size() >= sizeof addr);
    std::memcpy(&addr, card->data(), sizeof addr);
    in.open(addr, 3, 1);
  }
  in.drip();
  const auto start = Clock::now();
  go.count_down();
  for (auto& t : ranks) t.join();
  INFO((errors.empty() ? std::string() : errors.front()));
  CHECK(errors.empty());
  CHECK(Clock::now() - start < milliseconds(5000));
}

TEST_CASE("tcp accept: LOOM_HELLO_TIMEOUT is bounded", "[tcp][hello][config]") {
  auto store = std::make_shared<bootstrap::InMemoryStore>();
  for (const char* bad : {"50ms", "601s"}) {
    INFO(bad);
    auto e = test::catch_error([&] {
      test::make_comm(store, 0, 1, 0x4e110, {{"LOOM_HELLO_TIMEOUT", bad}});
    });
    CHECK(e.code() == ErrorCode::InvalidUsage);
    CHECK_THAT(e.what(), Contains("LOOM_HELLO_TIMEOUT"));
  }
}
