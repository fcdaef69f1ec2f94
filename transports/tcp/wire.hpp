// On-the-wire formats of the TCP transport. Fields are in the host's byte order: all ranks of a
// job must share it (little-endian x86_64 and aarch64 in practice); the magic detects otherwise.
#pragma once

#include <cstdint>

#include "transports/connection.hpp"

namespace loom::transport::tcp {

inline constexpr std::uint32_t kDataMagic = 0x4c4f4f4d;   // "LOOM"
inline constexpr std::uint32_t kHelloMagic = 0x4c4d4849;  // "LMHI"
inline constexpr std::uint16_t kWireVersion = 2;          // 2: authenticated hello

/// Precedes every message on a data socket.
struct MessageHeader {
  std::uint32_t magic = kDataMagic;
  std::uint16_t version = kWireVersion;
  std::uint16_t flags = 0;
  std::uint64_t comm_id = 0;
  Tag tag;
  std::uint64_t length = 0;
};
static_assert(sizeof(Tag) == 32);
static_assert(sizeof(MessageHeader) == 56);

enum class HeaderCheck { Ok, Corrupt, Mismatch };

/// Validates every field of a received data header before any payload byte is read: Corrupt
/// (wrong magic, version, flags or communicator: not a loom message of this job), Mismatch (a
/// message of this job, but not the one posted: other collective, sequence, or length).
inline HeaderCheck check_header(const MessageHeader& got, std::uint64_t comm_id,
                                const Tag& expected, std::uint64_t posted_len) {
  if (got.magic != kDataMagic || got.version != kWireVersion || got.flags != 0 ||
      got.comm_id != comm_id)
    return HeaderCheck::Corrupt;
  if (!(got.tag == expected) || got.length != posted_len) return HeaderCheck::Mismatch;
  return HeaderCheck::Ok;
}

/// Connection setup: the accepting side sends a random challenge (crypto::Nonce, 16 bytes); the
/// connecting side answers with a Hello followed by crypto::prove(secret, kHelloDomain, nonce,
/// hello bytes) (32 bytes). The acceptor checks the proof before it trusts any field of the hello
/// or reads anything else; a connection that fails is dropped and logged.
inline constexpr const char* kHelloDomain = "loom-tcp-hello-v2";

/// First bytes on every new data socket, from the connecting side.
struct Hello {
  std::uint32_t magic = kHelloMagic;
  std::uint16_t version = kWireVersion;
  std::uint16_t nsockets = 0;
  std::uint64_t comm_id = 0;
  std::int32_t from_rank = -1;
  std::int32_t to_rank = -1;
  std::uint32_t socket_index = 0;
  std::uint32_t reserved = 0;
};
static_assert(sizeof(Hello) == 32);

}  // namespace loom::transport::tcp
