// Log-depth allgather and reduce-scatter (pure functions) after Bruck et al.: ceil(log2 n)
// rounds, each one message per direction, for any rank count, with no final rotation.
//
// Ranks are numbered v = 0..n-1 along the ring order. Relative block i of position v is the
// block of the rank at position v + i (mod n). Allgather (bruck_allgather.cpp): in round k a rank
// holds its relative blocks [0, 2^k), sends the first min(2^k, n - 2^k) of them to position
// v - 2^k and receives its relative blocks [2^k, 2^k + that) from v + 2^k, straight into their
// places in the output. Reduce-scatter (bruck_reduce_scatter.cpp) runs the same graph backwards:
// in round k = K-1 .. 0 a rank sends its partial sums of relative blocks [2^k, 2^k + c_k) to
// position v + 2^k, which folds them into its relative blocks [0, c_k); after round 0 relative
// block 0, its own, holds every rank's contribution. Each rank sends and receives (n - 1) / n of
// the gathered buffer, as the ring does, in log2 n dependent messages instead of n - 1.
#pragma once

#include <cstddef>
#include <vector>

#include "algorithms/plan.hpp"
#include "algorithms/ring.hpp"

namespace loom::algo {

/// Allgather of p.count elements per rank (p.order, p.in_place as for ring_allgather).
Plan bruck_allgather(const RingParams& p);
/// Reduce-scatter of p.count elements per rank (as ring_reduce_scatter). Scratch: about twice
/// the input.
Plan bruck_reduce_scatter(const RingParams& p);

namespace bruck {

/// The geometry both schedules share: positions along the ring order and runs of relative
/// blocks whose places in a rank-indexed buffer are contiguous.
struct Geometry {
  int n = 1;
  int pos = 0;
  std::vector<int> order;  // order[position] = rank

  explicit Geometry(const RingParams& p);
  [[nodiscard]] int rank_at(long position) const;
  /// Rounds: ceil(log2 n).
  [[nodiscard]] int rounds() const;
  /// Blocks moved in round k: min(2^k, n - 2^k).
  [[nodiscard]] int moved(int k) const;
};

/// A run of relative blocks [first, first + len) of position `at` whose ranks are consecutive
/// (their blocks lie side by side in a rank-indexed buffer, starting at block `rank`).
struct Run {
  int first = 0;
  int len = 0;
  int rank = 0;
};

/// The runs covering relative blocks [first, first + len) of position `at`, also cut where a
/// relative index reaches `cut` (0: nowhere).
std::vector<Run> runs(const Geometry& g, long at, int first, int len, int cut = 0);

/// Appends `step`, waiting for every step in `deps` (kNoStep entries ignored).
std::uint32_t add_after(Plan& plan, Step step, const std::vector<std::uint32_t>& deps);

}  // namespace bruck
}  // namespace loom::algo
