// What the cost model is asked about: a collective, an algorithm, the job's shape and the
// pipeline the plans use.
#pragma once

#include <cstddef>
#include <string_view>

#include "collective/kinds.hpp"
#include "selector/plan_policy.hpp"

namespace loom::select {

// The one vocabulary (collective/kinds.hpp); the tables index the five data collectives.
using Coll = coll::CollKind;
using Algo = coll::Algo;
inline constexpr std::size_t kColls = coll::kNumDataColls;
inline constexpr std::size_t kAlgos = coll::kNumAlgos;

/// True when `a` has a schedule for `c` (its catalog row serves it).
bool supports(Coll c, Algo a);

/// Where the ranks are: `nhosts` hosts of `per_host` ranks each (the last may hold fewer), and
/// the CPUs of a host (0: unknown). A host with more ranks than CPUs runs its ranks on shared
/// CPUs (shared_cpu.hpp).
struct Shape {
  int nranks = 1;
  int nhosts = 1;
  int per_host = 1;
  int cores = 0;
  int tree_depth = 0;   // edges from the root to the deepest rank (0: computed from nranks)
  bool uneven = false;  // the hosts hold different numbers of ranks
};

/// The plans' messages: at most `chunk_bytes`, `depth` of them in flight per peer.
struct Pipeline {
  std::size_t chunk_bytes = kChunkBytes;
  std::size_t depth = 4;
};

/// Depth in edges of the deeper of the two trees for `nranks` flat ranks.
int flat_tree_depth(int nranks);

}  // namespace loom::select
