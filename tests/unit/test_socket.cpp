// Tests of the socket helpers (src/common/socket.hpp) on the loopback interface.
#include <fcntl.h>
#include <sys/socket.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <latch>
#include <numeric>
#include <thread>
#include <vector>

#include "common/socket.hpp"

using namespace std::chrono_literals;
using loom::Clock;
using loom::Deadline;
using loom::ErrorCode;
namespace net = loom::net;

namespace {

net::SocketAddress loopback(const char* host = "127.0.0.1") {
  auto a = net::resolve(host);
  REQUIRE(a.is_ok());
  return a.value();
}

bool ipv6_loopback_available() {
  auto a = net::resolve("[::1]:0");
  return a.is_ok() && net::listen_on(a.value()).is_ok();
}

// A loopback address whose port nobody listens on (bound, then closed again).
net::SocketAddress unused_address() {
  auto fd = net::listen_on(loopback());
  REQUIRE(fd.is_ok());
  auto a = net::bound_address(fd.value().get());
  REQUIRE(a.is_ok());
  return a.value();
}

bool cloexec(int fd) {
  return (::fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0;
}

struct Pair {
  net::Fd client;
  net::Fd server;
};

Pair connected_pair(const net::SocketAddress& bind) {
  auto listener = net::listen_on(bind);
  REQUIRE(listener.is_ok());
  auto addr = net::bound_address(listener.value().get());
  REQUIRE(addr.is_ok());
  auto client = net::connect_with_retry(addr.value(), Deadline::after(2s));
  REQUIRE(client.is_ok());
  auto server = net::accept_until(listener.value().get(), Deadline::after(2s));
  REQUIRE(server.is_ok());
  return {std::move(client).value(), std::move(server).value()};
}

long ms_since(Clock::time_point since) {
  return static_cast<long>(
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - since).count());
}

}  // namespace

TEST_CASE("socket: resolve accepts host:port, [v6]:port, bare hosts and names") {
  struct Case {
    const char* text;
    int family;
    std::uint16_t port;
    const char* shown;  // to_string(), or nullptr: not checked
  };
  for (const Case& c :
       {Case{"127.0.0.1:80", AF_INET, 80, "127.0.0.1:80"}, Case{"127.0.0.1", AF_INET, 0, nullptr},
        Case{"localhost:1234", AF_INET, 1234, nullptr},  // IPv4 preferred
        Case{"[::1]:80", AF_INET6, 80, "[::1]:80"}, Case{"::1", AF_INET6, 0, nullptr}}) {
    INFO(c.text);
    auto addr = net::resolve(c.text);
    REQUIRE(addr.is_ok());
    CHECK(addr.value().family() == c.family);
    CHECK(addr.value().port() == c.port);
    if (c.shown != nullptr) CHECK(addr.value().to_string() == c.shown);
  }
  CHECK(net::resolve("[::1]").is_ok());

  auto with_port = net::resolve("127.0.0.1:9");
  REQUIRE(with_port.is_ok());
  with_port.value().set_port(65535);
  CHECK(with_port.value().to_string() == "127.0.0.1:65535");
}

TEST_CASE("socket: resolve rejects malformed addresses") {
  for (const char* bad : {"", "127.0.0.1:", "127.0.0.1:99999", "127.0.0.1:8x", "127.0.0.1:-1",
                          "[::1", "[::1]x", "[::1]:", ":80", "[]:80"}) {
    INFO(bad);
    auto r = net::resolve(bad);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == ErrorCode::InvalidArgument);
  }
  auto hp = net::parse_host_port("node7:29500");
  REQUIRE(hp.is_ok());
  CHECK(hp.value().host == "node7");
  CHECK(hp.value().port == 29500);
  CHECK(hp.value().has_port);
  auto no_port = net::parse_host_port("node7");
  REQUIRE(no_port.is_ok());
  CHECK_FALSE(no_port.value().has_port);
}

TEST_CASE("socket: local_address_towards and interface_address") {
  auto target = loopback("127.0.0.1:9");
  auto local = net::local_address_towards(target);
  REQUIRE(local.is_ok());
  CHECK(local.value().to_string() == "127.0.0.1:0");
  auto lo = net::interface_address("lo");
  REQUIRE(lo.is_ok());
  CHECK(lo.value().to_string() == "127.0.0.1:0");
  auto none = net::interface_address("no-such-if0");
  REQUIRE_FALSE(none.is_ok());
  CHECK(none.status().code() == ErrorCode::InvalidArgument);
  CHECK_THAT(none.status().message(), Catch::Contains("no-such-if0"));
  CHECK_FALSE(net::host_name().empty());
}

TEST_CASE("socket: listen, connect, accept and exchange over IPv4 and IPv6") {
  std::vector<const char*> hosts = {"127.0.0.1"};
  if (ipv6_loopback_available()) {
    hosts.push_back("[::1]");
  } else {
    WARN("IPv6 loopback unavailable: IPv6 part skipped");
  }
  for (const char* host : hosts) {
    INFO(host);
    auto listener = net::listen_on(loopback(host));
    REQUIRE(listener.is_ok());
    CHECK(cloexec(listener.value().get()));
    auto addr = net::bound_address(listener.value().get());
    REQUIRE(addr.is_ok());
    CHECK(addr.value().port() != 0);
    auto client = net::connect_with_retry(addr.value(), Deadline::after(2s));
    REQUIRE(client.is_ok());
    auto server = net::accept_until(listener.value().get(), Deadline::after(2s));
    REQUIRE(server.is_ok());
    CHECK(cloexec(client.value().get()));
    CHECK(cloexec(server.value().get()));
    const char msg[] = "hello loom";
    REQUIRE(
        net::send_all(client.value().get(), msg, sizeof msg, Deadline::after(2s), "msg").is_ok());
    char got[sizeof msg] = {};
    REQUIRE(
        net::recv_all(server.value().get(), got, sizeof got, Deadline::after(2s), "msg").is_ok());
    CHECK(std::memcmp(msg, got, sizeof msg) == 0);
    CHECK(net::set_buffer_sizes(server.value().get(), 1 << 20).is_ok());
    CHECK(net::set_buffer_sizes(server.value().get(), 0).is_ok());
  }
}

TEST_CASE("socket: large transfers survive partial writes and reads") {
  Pair p = connected_pair(loopback());
  // Small buffers force many partial transfers; non-blocking receiver exercises the poll path.
  REQUIRE(net::set_buffer_sizes(p.client.get(), 64 * 1024).is_ok());
  REQUIRE(net::set_nonblocking(p.server.get(), true).is_ok());
  constexpr std::size_t kLen = 24 << 20;
  std::vector<std::uint32_t> out(kLen / 4);
  std::iota(out.begin(), out.end(), 7u);
  loom::Status sent;
  std::thread sender([&] {
    sent = net::send_all(p.client.get(), out.data(), kLen, Deadline::after(10s), "bulk");
  });
  std::vector<std::uint32_t> in(kLen / 4);
  auto got = net::recv_all(p.server.get(), in.data(), kLen, Deadline::after(10s), "bulk");
  sender.join();
  REQUIRE(sent.is_ok());
  REQUIRE(got.is_ok());
  CHECK(in == out);
  CHECK(net::send_all(p.client.get(), nullptr, 0, Deadline::after(0ms), "empty").is_ok());
}

TEST_CASE("socket: a closed peer is PeerFailed naming the operation") {
  // The server sends `sent` bytes and closes; the client asks for `want`.
  const auto recv_after_close = [](std::size_t sent, std::size_t want, const char* what) {
    Pair p = connected_pair(loopback());
    const std::vector<char> data(sent, 1);
    REQUIRE(net::send_all(p.server.get(), data.data(), sent, Deadline::after(2s), "x").is_ok());
    p.server.reset();
    std::vector<char> buf(want);
    return net::recv_all(p.client.get(), buf.data(), want, Deadline::after(2s), what);
  };
  SECTION("EOF before any byte") {
    auto s = recv_after_close(0, 8, "reading header");
    CHECK(s.code() == ErrorCode::PeerFailed);
    CHECK_THAT(s.message(), Catch::Contains("reading header"));
  }
  SECTION("EOF in the middle of a message") {
    auto s = recv_after_close(3, 10, "payload");
    CHECK(s.code() == ErrorCode::PeerFailed);
    CHECK_THAT(s.message(), Catch::Contains("3 of 10"));
  }
  SECTION("sending to a closed peer (no SIGPIPE)") {
    Pair p = connected_pair(loopback());
    p.server.reset();
    std::vector<char> chunk(1 << 20, 'x');
    loom::Status s;
    const auto start = Clock::now();
    while (s.is_ok() && ms_since(start) < 2000) {
      s = net::send_all(p.client.get(), chunk.data(), chunk.size(), Deadline::after(2s), "push");
    }
    CHECK(s.code() == ErrorCode::PeerFailed);
    CHECK_THAT(s.message(), Catch::Contains("push"));
  }
}

TEST_CASE("socket: recv_all and accept_until honour their deadlines") {
  Pair p = connected_pair(loopback());
  char buf[4];
  auto start = Clock::now();
  auto s = net::recv_all(p.client.get(), buf, sizeof buf, Deadline::after(50ms), "idle read");
  CHECK(s.code() == ErrorCode::Timeout);
  CHECK_THAT(s.message(), Catch::Contains("idle read"));
  CHECK(ms_since(start) >= 45);
  CHECK(ms_since(start) < 1000);

  auto listener = net::listen_on(loopback());
  REQUIRE(listener.is_ok());
  start = Clock::now();
  auto a = net::accept_until(listener.value().get(), Deadline::after(50ms));
  REQUIRE_FALSE(a.is_ok());
  CHECK(a.status().code() == ErrorCode::Timeout);
  CHECK(ms_since(start) < 1000);
}

TEST_CASE("socket: connect_with_retry waits for a server that starts late") {
  const net::SocketAddress addr = unused_address();
  std::latch client_trying(1);
  loom::Status server_status;
  std::thread server([&] {
    client_trying.wait();
    // Let the client's first attempts be refused before the listener exists.
    std::this_thread::sleep_for(30ms);
    auto listener = net::listen_on(addr);
    if (!listener.is_ok()) {
      server_status = listener.status();
      return;
    }
    auto conn = net::accept_until(listener.value().get(), Deadline::after(5s));
    server_status = conn.status();
    if (conn.is_ok()) {
      const char byte = 42;
      server_status = net::send_all(conn.value().get(), &byte, 1, Deadline::after(2s), "byte");
    }
  });
  client_trying.count_down();
  auto fd = net::connect_with_retry(addr, Deadline::after(5s));
  char byte = 0;
  if (fd.is_ok()) {
    CHECK(net::recv_all(fd.value().get(), &byte, 1, Deadline::after(2s), "byte").is_ok());
  }
  server.join();
  REQUIRE(server_status.is_ok());
  REQUIRE(fd.is_ok());
  CHECK(byte == 42);
}

TEST_CASE("socket: connect_with_retry times out naming the address") {
  const net::SocketAddress addr = unused_address();
  const auto start = Clock::now();
  auto fd = net::connect_with_retry(addr, Deadline::after(150ms));
  REQUIRE_FALSE(fd.is_ok());
  CHECK(fd.status().code() == ErrorCode::Timeout);
  CHECK_THAT(fd.status().message(), Catch::Contains(addr.to_string()));
  CHECK(ms_since(start) >= 140);
  CHECK(ms_since(start) < 1000);
}
