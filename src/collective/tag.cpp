#include "collective/tag.hpp"

#include <fmt/format.h>

namespace loom::coll {

std::string describe_tag(const Tag& tag) {
  if (tag.kind == static_cast<std::uint8_t>(CollKind::P2P))
    return fmt::format("send/recv message #{} ({} x {}, tag {})", tag.seq, tag.count,
                       to_string(static_cast<DataType>(tag.dtype)), tag.root);
  OpDesc op;
  op.kind = static_cast<CollKind>(tag.kind);
  op.dtype = static_cast<DataType>(tag.dtype);
  op.redop = static_cast<RedOp>(tag.redop);
  op.root = tag.root;
  op.count = tag.count;
  op.seq = tag.seq;
  return fmt::format("{}, message {}", describe(op), tag.index);
}

Status mismatched_message(int self, int peer, const Tag& expected, std::size_t expected_len,
                          const Tag& got, std::size_t got_len) {
  // A message of a call this rank has finished: it took no such message in that call.
  std::string stale;
  const bool p2p = expected.kind == static_cast<std::uint8_t>(CollKind::P2P) ||
                   got.kind == static_cast<std::uint8_t>(CollKind::P2P);
  if (p2p)
    stale =
        "; sends and receives between two ranks match in the order they are called, with the "
        "same tag and size, and in the same order relative to collectives";
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
