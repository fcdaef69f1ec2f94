// libFuzzer target: the accepting side of the tcp transport's handshake (HelloExchange in
// transports/tcp/tcp_accept.hpp), fed in chunks of any size, with garbage after the hello, the
// challenge written in pieces in between. Flags in the first byte put a valid proof in front of
// the fuzzed fields (so the field checks behind it are reached) and fix the fields a hello must
// match, so that every check is hit. Whatever comes in: no more than the hello is ever taken, a
// hello is verified only with a valid proof and fields in range, and the answer is the proof on
// the connector's challenge.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#include "transports/tcp/tcp_accept.hpp"

namespace tcp = loom::transport::tcp;
namespace crypto = loom::crypto;

namespace {

constexpr std::size_t kFields = sizeof(tcp::Hello);

void check_verified(const tcp::HelloExchange& ex, const tcp::HelloRules& rules,
                    const crypto::Nonce& challenge,
                    const std::array<std::uint8_t, tcp::kHelloMessageBytes>& msg) {
  const tcp::Hello& h = ex.hello();
  if (h.magic != tcp::kHelloMagic || h.version != tcp::kWireVersion || h.comm_id != rules.comm_id ||
      h.to_rank != rules.rank || h.from_rank < 0 || h.from_rank >= rules.rank || h.nsockets < 1 ||
      h.nsockets > tcp::kMaxSockets || h.socket_index >= h.nsockets)
    __builtin_trap();
  crypto::Mac proof{};
  std::memcpy(proof.data(), msg.data() + kFields, proof.size());
  const auto want = crypto::prove(rules.secret, tcp::kHelloDomain, challenge,
                                  std::span<const std::uint8_t>(msg.data(), kFields));
  if (!crypto::mac_equal(proof, want)) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  constexpr std::size_t kHead = 2 + sizeof(crypto::Nonce);
  if (size < kHead + tcp::kHelloMessageBytes) return 0;
  const std::uint8_t flags = data[0];
  const std::size_t chunk = 1 + data[1] % 97;
  crypto::Nonce challenge{};
  std::memcpy(challenge.data(), data + 2, challenge.size());
  std::array<std::uint8_t, tcp::kHelloMessageBytes> msg{};
  std::memcpy(msg.data(), data + kHead, msg.size());
  tcp::HelloRules rules;
  rules.secret.fill(0x42);
  rules.comm_id = 0x1234;
  rules.rank = 5;
  if ((flags & 2) != 0) {  // the fields a hello must match, leaving ranks and sockets fuzzed
    tcp::Hello h;
    std::memcpy(&h, msg.data(), kFields);
    h.magic = tcp::kHelloMagic;
    h.version = tcp::kWireVersion;
    h.comm_id = rules.comm_id;
    h.to_rank = rules.rank;
    std::memcpy(msg.data(), &h, kFields);
  }
  if ((flags & 1) != 0) {  // a valid proof in front of the fuzzed fields
    const auto mac = crypto::prove(rules.secret, tcp::kHelloDomain, challenge,
                                   std::span<const std::uint8_t>(msg.data(), kFields));
    std::memcpy(msg.data() + kFields, mac.data(), mac.size());
  }
  std::vector<std::uint8_t> stream(msg.begin(), msg.end());
  stream.insert(stream.end(), data + kHead + msg.size(), data + size);  // bytes past the hello

  tcp::HelloExchange ex(challenge);
  std::size_t pos = 0;
  while (pos < stream.size() && ex.wants() > 0) {
    const std::size_t n = std::min(chunk, stream.size() - pos);
    const std::size_t wanted = ex.wants();
    ex.read(std::span<const std::uint8_t>(stream.data() + pos, n), rules);
    const std::size_t taken = wanted - ex.wants();
    if (taken > n || taken > wanted) __builtin_trap();
    pos += n;  // what was offered beyond the hello is simply not taken
    if ((flags & 4) != 0 && !ex.output().empty()) ex.wrote(1 + flags % 7);
  }
  using State = tcp::HelloExchange::State;
  if (ex.state() != State::Verified && ex.state() != State::Failed) __builtin_trap();
  if (ex.state() == State::Failed && ex.failure().empty()) __builtin_trap();
  if (ex.state() == State::Verified) {
    check_verified(ex, rules, challenge, msg);
    while (!ex.output().empty()) ex.wrote(1);  // the rest of the challenge: no answer is due yet
    ex.admit((flags & 8) != 0, rules, "refused");
    if ((flags & 8) != 0) {
      crypto::Nonce theirs{};
      std::memcpy(theirs.data(), msg.data() + kFields + sizeof(crypto::Mac), theirs.size());
      const auto answer = crypto::prove(rules.secret, tcp::kAcceptDomain, theirs,
                                        std::span<const std::uint8_t>(msg.data(), kFields));
      auto out = ex.output();
      if (out.size() != answer.size() || !std::equal(out.begin(), out.end(), answer.begin()))
        __builtin_trap();
      ex.wrote(out.size());
      if (ex.state() != State::Done) __builtin_trap();
    } else if (ex.state() != State::Failed) {
      __builtin_trap();
    }
  }
  return 0;
}
