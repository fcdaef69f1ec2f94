// The one place a call becomes a plan: every collective kind and algorithm, for the
// communicator (src/core) and for loom-sim's replay alike, so that what the simulator replays
// is what runs. The algorithm is chosen before (the selector); the factory only builds.
#pragma once

#include <cstddef>
#include <vector>

#include "algorithms/plan.hpp"
#include "collective/kinds.hpp"
#include "collective/op.hpp"

namespace loom::algo {

/// A planned call: the call itself and the schedule parameters every rank shares.
struct PlanRequest {
  coll::OpDesc op;        // kind, count, dtype, root, all-to-all-v layout, peers (not the buffers)
  bool in_place = false;  // op.in_place(rank), for the caller's buffers
  coll::Algo algo = coll::Algo::Ring;  // Ring: a ring, or a chain for broadcast / reduce
  int rank = 0;
  int nranks = 1;
  std::vector<int> ring_order;          // empty: 0..n-1
  std::vector<std::vector<int>> hosts;  // ranks per host (trees per host); may be empty
  std::size_t chunk_bytes = std::size_t{512} * 1024;
  std::size_t depth = 4;
  std::size_t min_step_part_bytes = 0;  // see RingParams
  bool buffered_ring_sends = false;     // Plan::buffered_sends for rings
};

/// The plan of `r.op` on `r.rank`. The exchanges (all-to-all(v), gather, scatter, sends and
/// receives) and the barrier have one schedule each, whatever `r.algo` says; a reduction under
/// Algo::Deterministic gets the deterministic schedule; Tree covers allreduce, broadcast and
/// reduce (others fall back to Ring), Rd allreduce, Hier allreduce, allgather and reduce_scatter
/// where `hosts` are two or more of equal size (hierarchical_unfit; else Ring), Bruck allgather and
/// reduce_scatter.
Plan make_plan(const PlanRequest& r);

}  // namespace loom::algo
