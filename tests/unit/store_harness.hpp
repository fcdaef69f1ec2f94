// Helpers shared by the rendezvous store tests (test_store*.cpp).
#pragma once

#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/store.hpp"
#include "bootstrap/tcp_store.hpp"
#include "bootstrap/tcp_store_wire.hpp"
#include "catch_threads.hpp"
#include "common/crypto.hpp"

namespace store_test {

using namespace std::chrono_literals;
using loom::Clock;
using loom::Deadline;
using loom::ErrorCode;
namespace bs = loom::bootstrap;
namespace net = loom::net;
namespace wire = loom::bootstrap::wire;

constexpr std::uint64_t kCommId = 0x10057e57ull;

inline bs::Bytes bytes(const std::string& s) {
  return {s.begin(), s.end()};
}
inline std::string text(const bs::Bytes& b) {
  return {b.begin(), b.end()};
}

inline long elapsed_ms(Clock::time_point since) {
  return static_cast<long>(
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - since).count());
}

inline net::SocketAddress loopback_any_port() {
  auto a = net::resolve("127.0.0.1:0");
  REQUIRE(a.is_ok());
  return a.value();
}

inline std::unique_ptr<bs::TcpStoreServer> start_server(std::uint64_t comm_id = kCommId,
                                                        const bs::ServerOptions& options = {}) {
  auto s = bs::TcpStoreServer::start(loopback_any_port(), comm_id, {}, options);
  REQUIRE(s.is_ok());
  return std::move(s).value();
}

inline std::unique_ptr<bs::TcpStoreClient> connect_client(const bs::TcpStoreServer& server,
                                                          int rank,
                                                          std::uint64_t comm_id = kCommId) {
  auto c = bs::TcpStoreClient::connect(server.address(), comm_id, rank, Deadline::after(5s));
  REQUIRE(c.is_ok());
  return std::move(c).value();
}

/// A hand-made hello: rank 9 of another "process" unless told otherwise.
inline wire::Hello fake_hello(int rank = 9, std::uint32_t pid = 999999,
                              const std::string& host = "fake") {
  wire::Hello h;
  h.comm_id = kCommId;
  h.rank = rank;
  h.pid = pid;
  h.host = host;
  return h;
}

/// Connects and says a hello proved with `secret` by hand; returns without reading the answer.
inline net::Fd raw_hello_unchecked(const bs::TcpStoreServer& server,
                                   const loom::crypto::Secret& secret,
                                   const wire::Hello& h = fake_hello()) {
  auto fd = net::connect_with_retry(server.address(), Deadline::after(2s));
  REQUIRE(fd.is_ok());
  std::array<std::uint8_t, wire::kChallengeBytes> challenge{};
  REQUIRE(net::recv_all(fd.value().get(), challenge.data(), challenge.size(), Deadline::after(2s),
                        "challenge")
              .is_ok());
  loom::crypto::Nonce nonce{};
  std::copy_n(challenge.begin() + 8, nonce.size(), nonce.begin());
  auto fields = wire::encode_hello(h);
  auto proof = loom::crypto::prove(secret, wire::kHelloDomain, nonce, fields);
  std::vector<std::uint8_t> hello(fields.begin(), fields.end());
  hello.insert(hello.end(), proof.begin(), proof.end());
  const loom::crypto::Nonce mine{7, 7, 7};  // the client's challenge to the server
  hello.insert(hello.end(), mine.begin(), mine.end());
  REQUIRE(net::send_all(fd.value().get(), hello.data(), hello.size(), Deadline::after(2s), "hello")
              .is_ok());
  return std::move(fd).value();
}

/// A raw connection that has said a valid hello (the default, all-zero secret) and checked the
/// server's Ok ack and proof.
inline net::Fd raw_hello(const bs::TcpStoreServer& server, const loom::crypto::Secret& secret = {},
                         const wire::Hello& h = fake_hello()) {
  net::Fd fd = raw_hello_unchecked(server, secret, h);
  std::array<std::uint8_t, wire::kAckBytes> ack{};
  REQUIRE(net::recv_all(fd.get(), ack.data(), ack.size(), Deadline::after(2s), "ack").is_ok());
  CHECK(wire::get_u16(&ack[6]) == 0);
  std::array<std::uint8_t, wire::kServerProofBytes> server_proof{};
  REQUIRE(net::recv_all(fd.get(), server_proof.data(), server_proof.size(), Deadline::after(2s),
                        "server proof")
              .is_ok());
  const loom::crypto::Nonce mine{7, 7, 7};
  CHECK(loom::crypto::mac_equal(
      server_proof, loom::crypto::prove(secret, wire::kServerDomain, mine, wire::encode_hello(h))));
  return fd;
}

/// True when the server closes `fd` within `within`. Whatever the server sent before, e.g. its
/// challenge, is read and ignored.
inline bool server_drops(int fd, std::chrono::milliseconds within = 2s) {
  Deadline until = Deadline::after(within);
  for (int i = 0; i < 4096; ++i) {
    std::uint8_t b = 0;
    loom::Status st = net::recv_all(fd, &b, 1, until, "probe");
    if (!st.is_ok()) return st.code() == ErrorCode::PeerFailed;
  }
  return false;
}

inline void check_still_works(bs::Store& s, const std::string& key) {
  REQUIRE(s.set(key, bytes("ok")).is_ok());
  auto got = s.get(key, Deadline::after(2s));
  REQUIRE(got.is_ok());
  CHECK(text(got.value()) == "ok");
}

}  // namespace store_test
