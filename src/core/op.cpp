#include "core/op.hpp"

#include <limits>

namespace loom::core {

std::string_view to_string(CollKind k) {
  switch (k) {
    case CollKind::AllReduce: return "allreduce";
    case CollKind::AllGather: return "allgather";
    case CollKind::Broadcast: return "broadcast";
    case CollKind::Reduce: return "reduce";
    case CollKind::ReduceScatter: return "reduce_scatter";
    case CollKind::Barrier: return "barrier";
  }
  return "unknown-collective";
}

std::size_t OpDesc::send_bytes(int nranks) const {
  std::size_t b = count * dtype_size(dtype);
  return kind == CollKind::ReduceScatter ? b * static_cast<std::size_t>(nranks) : b;
}

std::size_t OpDesc::recv_bytes(int nranks) const {
  std::size_t b = count * dtype_size(dtype);
  return kind == CollKind::AllGather ? b * static_cast<std::size_t>(nranks) : b;
}

bool OpDesc::in_place(int rank) const {
  const auto* s = static_cast<const std::uint8_t*>(send);
  const auto* r = static_cast<const std::uint8_t*>(recv);
  std::size_t block = count * dtype_size(dtype) * static_cast<std::size_t>(rank);
  switch (kind) {
    case CollKind::AllGather: return s != nullptr && s == r + block;
    case CollKind::ReduceScatter: return r != nullptr && r == s + block;
    default: return s == r;
  }
}

std::string describe(const OpDesc& op) {
  if (op.kind == CollKind::Barrier) return fmt::format("barrier #{}", op.seq);
  std::string s =
      fmt::format("{} #{} ({} x {}", to_string(op.kind), op.seq, op.count, to_string(op.dtype));
  if (op.has_redop()) s += fmt::format(", {}", to_string(op.redop));
  if (op.has_root()) s += fmt::format(", root {}", op.root);
  return s + ")";
}

namespace {

// Send and receive ranges may be disjoint or in place exactly as documented (in_place()); any
// other overlap would have a collective read what it already overwrote. Addresses are compared
// as integers: device pointers too, without asking the device runtime.
template <typename Fail>
Status check_overlap(const OpDesc& op, int rank, int nranks, Fail&& fail) {
  const auto s = reinterpret_cast<std::uintptr_t>(op.send);
  const auto r = reinterpret_cast<std::uintptr_t>(op.recv);
  const std::size_t sb = op.send_bytes(nranks);
  const std::size_t rb = op.recv_bytes(nranks);
  if (s + sb <= r || r + rb <= s || op.in_place(rank)) return Status::ok();
  const std::size_t block = op.count * dtype_size(op.dtype);
  std::string rule = "send == recv";
  if (op.kind == CollKind::AllGather)
    rule = fmt::format("send == recv + rank x count elements ({} bytes here)",
                       block * static_cast<std::size_t>(rank));
  if (op.kind == CollKind::ReduceScatter)
    rule = fmt::format("recv == send + rank x recvcount elements ({} bytes here)",
                       block * static_cast<std::size_t>(rank));
  const auto where = [](std::uintptr_t a, std::uintptr_t b) {
    return a >= b ? fmt::format("+{}", a - b) : fmt::format("-{}", b - a);
  };
  return fail(fmt::format(
      "send and receive buffers overlap (send = recv {} bytes; {} and {} bytes long): they must "
      "be disjoint or in place exactly ({})",
      where(s, r), sb, rb, rule));
}

}  // namespace

Status validate(const OpDesc& op, int rank, int nranks) {
  auto fail = [&](const std::string& why) {
    return Status(ErrorCode::InvalidArgument,
                  fmt::format("rank {}: {}: {}", rank, describe(op), why));
  };
  if (!is_valid(op.dtype)) return fail(fmt::format("unknown data type {}", int(op.dtype)));
  if (op.has_redop() && !is_valid(op.redop))
    return fail(fmt::format("unknown reduction op {}", int(op.redop)));
  if (op.has_redop() && !supports(op.dtype, op.redop))
    return fail(
        fmt::format("reduction op {} is not defined for data type {} ({} takes the integer "
                    "types only)",
                    to_string(op.redop), to_string(op.dtype), to_string(op.redop)));
  if (op.has_root() && (op.root < 0 || op.root >= nranks))
    return fail(fmt::format("root {} is out of range [0, {})", op.root, nranks));
  std::size_t limit = std::numeric_limits<std::size_t>::max() / 2 / dtype_size(op.dtype) /
                      static_cast<std::size_t>(nranks);
  if (op.count > limit) return fail("count overflows the addressable size");
  if (op.count == 0 || op.kind == CollKind::Barrier) return Status::ok();
  bool needs_send = !(op.kind == CollKind::Broadcast && rank != op.root);
  bool needs_recv = !(op.kind == CollKind::Reduce && rank != op.root);
  if (needs_send && op.send == nullptr) return fail("send buffer is null");
  if (needs_recv && op.recv == nullptr) return fail("receive buffer is null");
  if (needs_send && needs_recv) return check_overlap(op, rank, nranks, fail);
  return Status::ok();
}

transport::Tag make_tag(const OpDesc& op, std::uint32_t index) {
  transport::Tag t;
  t.seq = op.seq;
  t.index = index;
  t.kind = static_cast<std::uint8_t>(op.kind);
  t.dtype = static_cast<std::uint8_t>(op.dtype);
  t.redop = op.has_redop() ? static_cast<std::uint8_t>(op.redop) : 0;
  t.root = op.has_root() ? op.root : -1;
  t.count = op.count;
  return t;
}

}  // namespace loom::core

namespace loom::transport {

std::string describe_tag(const Tag& tag) {
  core::OpDesc op;
  op.kind = static_cast<core::CollKind>(tag.kind);
  op.dtype = static_cast<DataType>(tag.dtype);
  op.redop = static_cast<RedOp>(tag.redop);
  op.root = tag.root;
  op.count = tag.count;
  op.seq = tag.seq;
  return fmt::format("{}, message {}", core::describe(op), tag.index);
}

Status mismatched_message(int self, int peer, const Tag& expected, std::size_t expected_len,
                          const Tag& got, std::size_t got_len) {
  // A message of a call this rank has finished: it took no such message in that call.
  std::string stale;
  if (got.seq < expected.seq)
    stale = fmt::format(
        "; rank {} finished its call #{} without taking this message (left unread): the ranks' "
        "calls #{} differ",
        self, got.seq, got.seq);
  return make_error(ErrorCode::Mismatch,
                    "mismatched collective calls: rank {} expected {} ({} bytes) from rank {}, "
                    "but rank {} sent {} ({} bytes){}",
                    self, describe_tag(expected), expected_len, peer, peer, describe_tag(got),
                    got_len, stale);
}

}  // namespace loom::transport
