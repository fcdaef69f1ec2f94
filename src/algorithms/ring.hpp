// Ring and chain schedules (pure functions). Allreduce is a ring reduce-scatter followed by a
// ring allgather; broadcast and reduce are pipelined chains along the ring order.
//
// Plans list their steps group by group: a group is `depth` chunks that travel the ring
// together, step by step. Within a group the next ring step overlaps the current one, and a new
// group's first sends queue right behind the previous group's last ones, so links stay busy
// while scratch stays at `depth` (or 2 x `depth`) chunks.
#pragma once

#include <cstddef>
#include <vector>

#include "algorithms/plan.hpp"

namespace loom::algo {

struct RingParams {
  int rank = 0;
  int nranks = 1;
  std::vector<int> order;  // ring order: order[i] is the rank at position i (empty: 0..n-1)
  std::size_t count = 0;   // elements: allreduce/broadcast/reduce total; allgather and
                           // reduce_scatter per rank
  std::size_t elem_size = 1;
  std::size_t chunk_bytes = std::size_t{512} * 1024;
  std::size_t depth = 4;  // chunks per group (pipeline depth)
  // Ring steps (allreduce, allgather, reduce_scatter; n >= 3): a block smaller than `depth`
  // chunks is cut into up to `depth` parts of at least this many bytes (0: whole chunks only).
  std::size_t min_step_part_bytes = std::size_t{16} * 1024;
  bool in_place = false;
  int root = 0;  // broadcast and reduce
};

Plan ring_allreduce(const RingParams& p);
Plan ring_allgather(const RingParams& p);
Plan ring_reduce_scatter(const RingParams& p);
Plan chain_broadcast(const RingParams& p);
Plan chain_reduce(const RingParams& p);
/// Zero-byte messages in ceil(log2 n) rounds: round k talks to rank +-2^k.
Plan dissemination_barrier(int rank, int nranks);

}  // namespace loom::algo
