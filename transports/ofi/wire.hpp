// What an ofi message carries. The 64-bit libfabric tag encodes the communicator, the sending
// rank, the operation sequence and the message (chunk) index:
//   [63..52] communicator (12 bits of its id)   [51..32] sending rank
//   [31..16] operation sequence (low 16 bits)   [15..0]  message index (low 16 bits)
// Receives match on communicator and sender only (the low 32 bits are ignored), so messages
// from one peer match posted receives in order (FI_ORDER_SAS) exactly like the other
// transports; every message starts with a Header that the receiver checks against the tag and
// length it expected, which turns a mismatched collective into an error instead of a hang.
#pragma once

#include <cstdint>

#include "transports/connection.hpp"

namespace loom::transport::ofi {

inline constexpr std::uint32_t kOfiMagic = 0x4c4f4649;  // "LOFI"
inline constexpr std::uint64_t kIgnoreOpBits = 0xffffffffULL;

inline std::uint64_t fabric_tag(std::uint64_t comm_id, int from_rank, const Tag& tag) {
  std::uint64_t comm = (comm_id ^ (comm_id >> 12) ^ (comm_id >> 24)) & 0xfffULL;
  return (comm << 52) | ((static_cast<std::uint64_t>(from_rank) & 0xfffffULL) << 32) |
         ((tag.seq & 0xffffULL) << 16) | (tag.index & 0xffffULL);
}

struct Header {
  std::uint32_t magic = kOfiMagic;
  std::uint32_t from_rank = 0;
  std::uint64_t comm_id = 0;
  Tag tag;
  std::uint64_t length = 0;
};
static_assert(sizeof(Header) == 56);

}  // namespace loom::transport::ofi
