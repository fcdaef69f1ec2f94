// One collective call as every layer sees it: what was asked, validated, and how it is named in
// messages and errors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "collective/kinds.hpp"
#include "common/status.hpp"
#include "loom/types.hpp"

namespace loom::coll {

/// An all-to-all-v's layout, in elements, `nranks` entries each: block p of the send buffer
/// (send_displs[p], send_counts[p]) goes to rank p; block p of the receive buffer comes from it.
struct VLayout {
  std::vector<std::size_t> send_counts, send_displs, recv_counts, recv_displs;
};

/// A point-to-point call: a send of OpDesc::count elements to `to` and/or a receive of
/// `recv_count` elements from `from` (-1: none), with the caller's tag. Messages between a pair
/// are numbered per direction (assigned at submission): the n-th send from a to b matches b's
/// n-th receive from a, whose tag and size must agree.
struct P2PDesc {
  int to = -1;
  int from = -1;
  std::size_t recv_count = 0;
  std::int32_t tag = 0;
  std::uint64_t send_seq = 0, recv_seq = 0;
  /// The receive is numbered when it starts, not when it is submitted: an earlier receive from
  /// any source had not found its sender yet (CallLedger::number_p2p).
  bool recv_deferred = false;
  /// A receive from whichever rank's next message to this rank first has `tag` (`from` is -1
  /// until that rank is known).
  bool any_source = false;
  /// The collectives this rank had issued when the call was started (its place among them):
  /// a send and its receive must agree, or the pair issued sends, receives and collectives in
  /// different orders. Calls in a group run after the group's collectives.
  std::uint64_t epoch = 0;
  /// The call's p2p record in the call ledger (CallLedger::p2p_submitted); ~0: none.
  std::uint64_t record = ~std::uint64_t{0};
  [[nodiscard]] bool receives() const { return from >= 0 || any_source; }
};

struct OpDesc {
  CollKind kind = CollKind::AllReduce;
  DataType dtype = DataType::Uint8;
  RedOp redop = RedOp::Sum;
  int root = -1;
  std::size_t count =
      0;  // the call's count argument (allgather: per rank; reduce_scatter: recvcount)
  const void* send = nullptr;
  void* recv = nullptr;
  std::uint64_t seq = 0;             // assigned at submission
  std::shared_ptr<const VLayout> v;  // AllToAllV only (count is 0: totals differ by rank)
  P2PDesc p2p;                       // P2P only (seq is unused: not a collective call)
  double scalar = 1.0;               // PreMulSum only: this rank's input multiplier
  /// An allreduce that carries a group's allreduces packed (fused_split()): how many calls and
  /// how their counts split the total, so that ranks that split a group differently are told so
  /// even when the totals agree. 0: one call.
  std::uint32_t fused = 0;

  [[nodiscard]] bool has_redop() const {
    return kind == CollKind::AllReduce || kind == CollKind::Reduce ||
           kind == CollKind::ReduceScatter;
  }
  [[nodiscard]] bool has_root() const {
    return kind == CollKind::Broadcast || kind == CollKind::Reduce || kind == CollKind::Gather ||
           kind == CollKind::Scatter;
  }
  /// Whether this rank reads `send` / writes `recv` (a reduce's non-roots receive nothing, a
  /// broadcast's and a scatter's non-roots send nothing, a gather's non-roots receive nothing).
  [[nodiscard]] bool uses_send(int rank) const {
    if (kind == CollKind::P2P) return p2p.to >= 0;
    return !((kind == CollKind::Broadcast || kind == CollKind::Scatter) && rank != root);
  }
  [[nodiscard]] bool uses_recv(int rank) const {
    if (kind == CollKind::P2P) return p2p.receives();
    return !((kind == CollKind::Reduce || kind == CollKind::Gather) && rank != root);
  }
  /// The extent of the send / receive buffer in bytes (the largest on any rank for the rooted
  /// calls: the root's; an all-to-all-v's: the end of its furthest block).
  [[nodiscard]] std::size_t send_bytes(int nranks) const;
  /// True when this rank scales its input before the reduction (PreMulSum, scalar other than 1).
  [[nodiscard]] bool premultiplies() const {
    return has_redop() && redop == RedOp::PreMulSum && scalar != 1.0;
  }
  [[nodiscard]] std::size_t recv_bytes(int nranks) const;
  [[nodiscard]] bool in_place(int rank) const;
  /// True when `rank` holds a result of an Avg reduction: it divides its own copy by n at the
  /// end (Avg reduces as Sum until then).
  [[nodiscard]] bool divides_for_avg(int rank) const {
    return has_redop() && redop == RedOp::Avg && count != 0 &&
           !(kind == CollKind::Reduce && rank != root);
  }
};

/// Checks arguments before anything is queued; errors name the rank and the operation.
Status validate(const OpDesc& op, int rank, int nranks);

/// "allreduce #42 (1024 x float, sum)".
std::string describe(const OpDesc& op);

/// OpDesc::fused of a group's allreduces with these element counts, in call order: the number of
/// calls (up to 255) in the low byte, a hash of the counts above (never 0).
std::uint32_t fused_split(const std::vector<std::size_t>& counts);

}  // namespace loom::coll
