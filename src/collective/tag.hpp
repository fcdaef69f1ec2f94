// The identity of one message: which call it belongs to and its place in that call. Carried in
// every message header and checked by the receiver before any payload is accepted; transports
// compare tags for equality only and render them (describe_tag) in their Mismatch errors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "collective/op.hpp"
#include "common/status.hpp"

namespace loom::coll {

struct Tag {
  std::uint64_t seq = 0;    // operation sequence number on the communicator
  std::uint32_t index = 0;  // message index within the operation for this (peer, direction)
  std::uint8_t kind = 0;    // the collective (CollKind)
  std::uint8_t dtype = 0;
  std::uint8_t redop = 0;
  std::uint8_t pad = 0;
  std::int32_t root = -1;
  /// What else both sides must agree on: a send's or receive's collective epoch (the collectives
  /// its rank had issued before it, mod 2^32: OpDesc::P2PDesc::epoch); a fused allreduce's split
  /// of its group (OpDesc::fused); 0 otherwise.
  std::uint32_t context = 0;
  std::uint64_t count = 0;  // the collective's element count argument

  friend bool operator==(const Tag&, const Tag&) = default;
};
static_assert(sizeof(Tag) == 32, "Tag is part of every transport's wire header");

/// The tag of message `index` of a collective `op` on one (peer, direction).
inline Tag make_tag(const OpDesc& op, std::uint32_t index) {
  Tag t;
  t.seq = op.seq;
  t.index = index;
  t.kind = static_cast<std::uint8_t>(op.kind);
  t.dtype = static_cast<std::uint8_t>(op.dtype);
  t.redop = op.has_redop() ? static_cast<std::uint8_t>(op.redop) : 0;
  t.root = op.has_root() ? op.root : -1;
  t.context = op.fused;
  t.count = op.count;
  return t;
}

/// The tag of message `index` of `op` that this rank sends (`is_send`) or receives: a
/// collective's (make_tag), or a point-to-point call's, numbered per pair and direction and
/// carrying the caller's tag, identical on both sides of a matching send and receive.
inline Tag message_tag(const OpDesc& op, bool is_send, std::uint32_t index) {
  if (op.kind != CollKind::P2P) return make_tag(op, index);
  Tag t;
  t.seq = is_send ? op.p2p.send_seq : op.p2p.recv_seq;
  t.index = index;
  t.kind = static_cast<std::uint8_t>(CollKind::P2P);
  t.dtype = static_cast<std::uint8_t>(op.dtype);
  t.root = op.p2p.tag;
  t.context = static_cast<std::uint32_t>(op.p2p.epoch);
  t.count = is_send ? op.count : op.p2p.recv_count;
  return t;
}

/// "allreduce #42 (1024 x float, sum), message 3"; "send/recv message #7 (16 x float, tag 2)".
std::string describe_tag(const Tag& tag);

/// The Mismatch error of a message whose tag or length differs from what `self` expected from
/// `peer`: names both calls.
Status mismatched_message(int self, int peer, const Tag& expected, std::size_t expected_len,
                          const Tag& got, std::size_t got_len);

}  // namespace loom::coll
