#include "collective/op.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <vector>

namespace loom::coll {

namespace {

// The end of the furthest block of a v-layout, in elements.
std::size_t extent(const std::vector<std::size_t>& counts, const std::vector<std::size_t>& displs) {
  std::size_t end = 0;
  for (std::size_t p = 0; p < counts.size() && p < displs.size(); ++p)
    if (counts[p] > 0) end = std::max(end, displs[p] + counts[p]);
  return end;
}

}  // namespace

std::size_t OpDesc::send_bytes(int nranks) const {
  const std::size_t b = count * dtype_size(dtype);
  const auto n = static_cast<std::size_t>(nranks);
  switch (kind) {
    case CollKind::ReduceScatter:
    case CollKind::AllToAll:
    case CollKind::Scatter: return b * n;
    case CollKind::AllToAllV:
      return v ? extent(v->send_counts, v->send_displs) * dtype_size(dtype) : 0;
    case CollKind::P2P: return p2p.to >= 0 ? b : 0;
    default: return b;
  }
}

std::size_t OpDesc::recv_bytes(int nranks) const {
  const std::size_t b = count * dtype_size(dtype);
  const auto n = static_cast<std::size_t>(nranks);
  switch (kind) {
    case CollKind::AllGather:
    case CollKind::AllToAll:
    case CollKind::Gather: return b * n;
    case CollKind::AllToAllV:
      return v ? extent(v->recv_counts, v->recv_displs) * dtype_size(dtype) : 0;
    case CollKind::P2P: return p2p.receives() ? p2p.recv_count * dtype_size(dtype) : 0;
    default: return b;
  }
}

bool OpDesc::in_place(int rank) const {
  const auto* s = static_cast<const std::uint8_t*>(send);
  const auto* r = static_cast<const std::uint8_t*>(recv);
  std::size_t block = count * dtype_size(dtype) * static_cast<std::size_t>(rank);
  switch (kind) {
    case CollKind::AllGather: return s != nullptr && s == r + block;
    case CollKind::ReduceScatter: return r != nullptr && r == s + block;
    case CollKind::Gather: return rank == root && s != nullptr && s == r + block;
    case CollKind::Scatter: return rank == root && r != nullptr && r == s + block;
    case CollKind::P2P: return false;  // a sendrecv's buffers must be disjoint
    default: return s == r;
  }
}

namespace {

std::string describe_p2p(const OpDesc& op) {
  const P2PDesc& p = op.p2p;
  const auto dt = to_string(op.dtype);
  // A deferred receive is numbered when it starts (CallLedger::number_p2p).
  const std::string recv_no = p.recv_deferred ? "?" : std::to_string(p.recv_seq);
  if (p.to >= 0 && p.from >= 0)
    return fmt::format(
        "sendrecv (send #{} to rank {}, {} x {}; recv #{} from rank {}, {} x {}; tag {})",
        p.send_seq, p.to, op.count, dt, recv_no, p.from, p.recv_count, dt, p.tag);
  if (p.to >= 0)
    return fmt::format("send #{} to rank {} ({} x {}, tag {})", p.send_seq, p.to, op.count, dt,
                       p.tag);
  if (p.any_source)
    return fmt::format("recv from any source ({} x {}, tag {})", p.recv_count, dt, p.tag);
  return fmt::format("recv #{} from rank {} ({} x {}, tag {})", recv_no, p.from, p.recv_count, dt,
                     p.tag);
}

}  // namespace

std::string describe(const OpDesc& op) {
  if (op.kind == CollKind::Barrier) return fmt::format("barrier #{}", op.seq);
  // An all-to-all-v's counts differ by rank: its name must read the same on every rank.
  if (op.kind == CollKind::AllToAllV)
    return fmt::format("alltoallv #{} ({})", op.seq, to_string(op.dtype));
  if (op.kind == CollKind::P2P) return describe_p2p(op);
  std::string s =
      fmt::format("{} #{} ({} x {}", to_string(op.kind), op.seq, op.count, to_string(op.dtype));
  if (op.has_redop()) s += fmt::format(", {}", to_string(op.redop));
  if (op.has_root()) s += fmt::format(", root {}", op.root);
  if (op.fused != 0)
    s += fmt::format("; {} calls fused, split {:06x}", op.fused & 0xff, op.fused >> 8);
  return s + ")";
}

std::uint32_t fused_split(const std::vector<std::size_t>& counts) {
  std::uint32_t h = 2166136261u;  // FNV-1a over the counts' bytes
  for (std::size_t c : counts)
    for (int b = 0; b < 8; ++b) {
      h ^= static_cast<std::uint32_t>((c >> (8 * b)) & 0xff);
      h *= 16777619u;
    }
  const auto calls = static_cast<std::uint32_t>(std::min<std::size_t>(counts.size(), 255));
  return (h & 0xffffff00u) | (calls == 0 ? 1u : calls);
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
  if (op.kind == CollKind::Gather)
    rule = fmt::format("on the root, send == recv + rank x count elements ({} bytes here)",
                       block * static_cast<std::size_t>(rank));
  if (op.kind == CollKind::Scatter)
    rule = fmt::format("on the root, recv == send + rank x count elements ({} bytes here)",
                       block * static_cast<std::size_t>(rank));
  const auto where = [](std::uintptr_t a, std::uintptr_t b) {
    return a >= b ? fmt::format("+{}", a - b) : fmt::format("-{}", b - a);
  };
  return fail(fmt::format(
      "send and receive buffers overlap (send = recv {} bytes; {} and {} bytes long): they must "
      "be disjoint or in place exactly ({})",
      where(s, r), sb, rb, rule));
}

// An all-to-all-v's layout: n entries each, no count or end that overflows, and in place only
// with the same layout both ways (the blocks received land where the ones sent were).
template <typename Fail>
Status check_v_layout(const OpDesc& op, int nranks, Fail&& fail) {
  if (!op.v) return fail("no counts and displacements");
  const auto n = static_cast<std::size_t>(nranks);
  const VLayout& l = *op.v;
  if (l.send_counts.size() != n || l.send_displs.size() != n || l.recv_counts.size() != n ||
      l.recv_displs.size() != n)
    return fail(fmt::format(
        "counts and displacements need {} entries each (one per rank); got send {} / {}, "
        "receive {} / {}",
        n, l.send_counts.size(), l.send_displs.size(), l.recv_counts.size(), l.recv_displs.size()));
  const std::size_t limit = std::numeric_limits<std::size_t>::max() / 4 / dtype_size(op.dtype);
  for (std::size_t p = 0; p < n; ++p)
    if (l.send_counts[p] > limit || l.send_displs[p] > limit || l.recv_counts[p] > limit ||
        l.recv_displs[p] > limit)
      return fail(fmt::format("the block for rank {} overflows the addressable size", p));
  const bool same = op.send != nullptr && op.send == op.recv;
  if (same && (l.send_counts != l.recv_counts || l.send_displs != l.recv_displs))
    return fail(
        "in place (send == recv) needs the same counts and displacements for sending and "
        "receiving");
  // Received blocks that overlap would leave whichever arrived last.
  std::vector<std::size_t> order;
  for (std::size_t p = 0; p < n; ++p)
    if (l.recv_counts[p] > 0) order.push_back(p);
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return l.recv_displs[a] < l.recv_displs[b]; });
  for (std::size_t i = 1; i < order.size(); ++i) {
    const std::size_t a = order[i - 1], b = order[i];
    if (l.recv_displs[a] + l.recv_counts[a] > l.recv_displs[b])
      return fail(fmt::format(
          "the receive blocks from ranks {} and {} overlap (elements [{}, {}) and [{}, {})): each "
          "block needs its own place",
          a, b, l.recv_displs[a], l.recv_displs[a] + l.recv_counts[a], l.recv_displs[b],
          l.recv_displs[b] + l.recv_counts[b]));
  }
  return Status::ok();
}

// A point-to-point call's peers: in range, another rank, at least one.
template <typename Fail>
Status check_p2p(const OpDesc& op, int rank, int nranks, std::size_t limit, Fail&& fail) {
  const P2PDesc& p = op.p2p;
  if (p.any_source && (p.to != -1 || p.from != -1))
    return fail("a receive from any source names no peer (send separately)");
  for (int peer : {p.to, p.from}) {
    if (peer == -1) continue;  // none
    if (peer < 0 || peer >= nranks)
      return fail(fmt::format("peer {} is out of range [0, {})", peer, nranks));
    if (peer == rank) return fail("the peer is this rank (copy the buffer instead)");
  }
  if (p.to == -1 && !p.receives()) return fail("neither a peer to send to nor one to receive from");
  if (p.recv_count > limit) return fail("count overflows the addressable size");
  return Status::ok();
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
  if (op.kind == CollKind::P2P) {
    LOOM_RETURN_IF_ERROR(check_p2p(op, rank, nranks, limit, fail));
    if (op.send_bytes(nranks) == 0 && op.recv_bytes(nranks) == 0) return Status::ok();
  } else if (op.kind == CollKind::AllToAllV) {
    LOOM_RETURN_IF_ERROR(check_v_layout(op, nranks, fail));
    if (op.send_bytes(nranks) == 0 && op.recv_bytes(nranks) == 0) return Status::ok();
  } else if (op.count == 0 || op.kind == CollKind::Barrier) {
    return Status::ok();
  }
  const bool needs_send = op.uses_send(rank) && op.send_bytes(nranks) > 0;
  const bool needs_recv = op.uses_recv(rank) && op.recv_bytes(nranks) > 0;
  if (needs_send && op.send == nullptr) return fail("send buffer is null");
  if (needs_recv && op.recv == nullptr) return fail("receive buffer is null");
  if (needs_send && needs_recv) return check_overlap(op, rank, nranks, fail);
  return Status::ok();
}

}  // namespace loom::coll
