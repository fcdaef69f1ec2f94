#include "collective/op.hpp"

#include <fmt/format.h>

#include <limits>

namespace loom::coll {

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

}  // namespace loom::coll
