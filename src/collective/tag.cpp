#include "collective/tag.hpp"

#include <fmt/format.h>

namespace loom::coll {

std::string describe_tag(const Tag& tag) {
  if (tag.kind == static_cast<std::uint8_t>(CollKind::P2P))
    return fmt::format("send/recv message #{} ({} x {}, tag {}, {} collective(s) before it)",
                       tag.seq, tag.count, to_string(static_cast<DataType>(tag.dtype)), tag.root,
                       tag.context);
  OpDesc op;
  op.kind = static_cast<CollKind>(tag.kind);
  op.dtype = static_cast<DataType>(tag.dtype);
  op.redop = static_cast<RedOp>(tag.redop);
  op.root = tag.root;
  op.count = tag.count;
  op.seq = tag.seq;
  op.fused = tag.context;
  return fmt::format("{}, message {}", describe(op), tag.index);
}

Status mismatched_message(int self, int peer, const Tag& expected, std::size_t expected_len,
                          const Tag& got, std::size_t got_len) {
  // A message of a call this rank has finished: it took no such message in that call.
  std::string stale;
  const bool p2p = expected.kind == static_cast<std::uint8_t>(CollKind::P2P) ||
                   got.kind == static_cast<std::uint8_t>(CollKind::P2P);
  Tag same_context = got;
  same_context.context = expected.context;
  if (p2p && got.kind == expected.kind && same_context == expected && got_len == expected_len)
    stale = fmt::format(
        "; rank {} issued its send after {} collective call(s) and rank {} its receive after {}: "
        "a pair must issue its sends, receives and collectives in the same order",
        peer, got.context, self, expected.context);
  else if (p2p)
    stale =
        "; sends and receives between two ranks match in the order they are called, with the "
        "same tag and size, and in the same order relative to collectives";
  else if (same_context == expected && got_len == expected_len)
    stale =
        "; the ranks split a group's allreduces differently: every rank must make the same calls "
        "with the same counts in a group";
  else if (got.seq < expected.seq)
    stale = fmt::format(
        "; rank {} finished its call #{} without taking this message (left unread): the ranks' "
        "calls #{} differ",
        self, got.seq, got.seq);
  return make_error(ErrorCode::Mismatch,
                    "{}: rank {} expected {} ({} bytes) from rank {}, but rank {} sent {} ({} "
                    "bytes){}",
                    p2p ? "mismatched send/recv" : "mismatched collective calls", self,
                    describe_tag(expected), expected_len, peer, peer, describe_tag(got), got_len,
                    stale);
}

}  // namespace loom::coll
