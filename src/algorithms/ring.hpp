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

/// RingParams::min_step_part_bytes: 16 KiB, or 4 KiB when ranks share CPUs, where splitting a
/// step lets the ranks of a CPU take turns on it (8 ranks on 2 CPUs: 64 KiB-256 KiB allreduce
/// 114-136, 195-201 and 333-366 us against 175-180, 305-324 and 434-440 with 16 KiB parts).
inline constexpr std::size_t kMinStepPartBytes = std::size_t{16} * 1024;
inline constexpr std::size_t kSharedCpuMinStepPartBytes = std::size_t{4} * 1024;

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
  // chunks but at least `depth` x this many bytes is cut into `depth` parts (0: never).
  std::size_t min_step_part_bytes = kMinStepPartBytes;
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
