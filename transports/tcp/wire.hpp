// On-the-wire formats of the TCP transport. Fields are in the host's byte order: all ranks of a
// job must share it (little-endian x86_64 and aarch64 in practice); the magic detects otherwise.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "transports/connection.hpp"
#include "transports/striping.hpp"

namespace loom::transport::tcp {

inline constexpr std::uint32_t kDataMagic = 0x4c4f4f4d;   // "LOOM"
inline constexpr std::uint32_t kHelloMagic = 0x4c4d4849;  // "LMHI"
inline constexpr std::uint16_t kWireVersion = 4;          // 4: mutual authentication; 3: striping

inline constexpr std::size_t kMaxSockets = 16;        // sockets per peer
inline constexpr std::size_t kMinStripe = 64u << 10;  // smallest striping threshold
// How messages split into parts (shared with transports/striped/striped_connection.hpp).
using transport::kMaxParts;
using transport::kStripeAlign;
using transport::stripe_part_len;
using transport::stripe_parts;

/// Precedes every part of a message on a data socket (an unstriped message is one part).
struct MessageHeader {
  std::uint32_t magic = kDataMagic;
  std::uint16_t version = kWireVersion;
  std::uint16_t part = 0;  // index of this part within its message
  std::uint64_t comm_id = 0;
  Tag tag;
  std::uint64_t length = 0;  // the whole message's length
};
static_assert(sizeof(Tag) == 32);
static_assert(sizeof(MessageHeader) == 56);

enum class HeaderCheck { Ok, Corrupt, Mismatch };

/// Validates every field of a received data header before any payload byte is read: Corrupt
/// (wrong magic, version or communicator: not a loom message of this job; or a part out of
/// place), Mismatch (a message of this job, but not the one posted: other collective, sequence,
/// or length).
inline HeaderCheck check_header(const MessageHeader& got, std::uint64_t comm_id,
                                const Tag& expected, std::uint64_t posted_len,
                                std::uint16_t part = 0) {
  if (got.magic != kDataMagic || got.version != kWireVersion || got.comm_id != comm_id)
    return HeaderCheck::Corrupt;
  if (!(got.tag == expected) || got.length != posted_len) return HeaderCheck::Mismatch;
  if (got.part != part) return HeaderCheck::Corrupt;
  return HeaderCheck::Ok;
}

/// Connection setup, mutually authenticated: the accepting side sends a random challenge
/// (crypto::Nonce, 16 bytes); the connecting side answers with a Hello, crypto::prove(secret,
/// kHelloDomain, challenge, hello bytes) (32 bytes) and a challenge of its own (16 bytes). The
/// acceptor checks the proof before it trusts any field of the hello or reads anything else (a
/// connection that fails is dropped and logged), then answers crypto::prove(secret,
/// kAcceptDomain, the connector's challenge, hello bytes) (32 bytes), which the connector checks
/// before it sends or reads any data: neither side talks to a process that does not hold the
/// job's secret.
inline constexpr const char* kHelloDomain = "loom-tcp-hello-v2";
inline constexpr const char* kAcceptDomain = "loom-tcp-accept-v1";

/// First bytes on every new data socket, from the connecting side. The connecting (lower) rank
/// chooses the socket count and the striping threshold; the accepting rank adopts them, so ranks
/// whose automatic choices differ (other core or rank counts per host) still agree.
struct Hello {
  std::uint32_t magic = kHelloMagic;
  std::uint16_t version = kWireVersion;
  std::uint16_t nsockets = 0;
  std::uint64_t comm_id = 0;
  std::int32_t from_rank = -1;
  std::int32_t to_rank = -1;
  std::uint32_t socket_index = 0;
  std::uint32_t stripe_kib = 0;  // messages of at least twice this many KiB are striped
};
static_assert(sizeof(Hello) == 32);
/// The connecting side's whole hello: Hello, its proof, its own challenge.
inline constexpr std::size_t kHelloMessageBytes = sizeof(Hello) + 32 + 16;

}  // namespace loom::transport::tcp
