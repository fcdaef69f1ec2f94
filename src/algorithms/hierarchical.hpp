// Hierarchical allreduce (pure function) for hosts that run several ranks each: a reduce-scatter
// inside each host (local rank j ends with shard j of its host's sum), an allreduce of shard j
// with its counterparts, the local ranks j of the other hosts (a ring over the hosts), and an
// allgather of the shards inside each host. Each host's NICs carry 2 (H - 1) / H of the buffer
// (H hosts), where a ring over all n ranks carries 2 (n - 1) / n, and every local rank drives
// its own stream across hosts, so a host with a NIC per local rank uses them all. The phases
// follow one another; inside a phase the steps are pipelined in chunks. The ring across hosts
// gives every counterpart the same bits, so every rank's result is bitwise identical.
//
// Allgather and reduce-scatter split the same way by columns: column j is the blocks of the local
// ranks j of every host. Allgather: a ring allgather of each rank's block with its counterparts
// (across hosts, local rank j carries column j), then a ring of the local ranks passes the
// columns on. Reduce-scatter: a ring reduce-scatter of the columns inside each host (local rank j
// folds column j), then a ring reduce-scatter of the folded column across the hosts. Each host's
// NICs carry (H - 1) / H of the gathered buffer, the least a host can, every local rank its share.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "algorithms/plan.hpp"

namespace loom::algo {

struct HierParams {
  int rank = 0;
  std::vector<std::vector<int>> hosts;  // ranks per host, each host's in its local order
  std::size_t count = 0;                // elements (allgather, reduce-scatter: per rank)
  std::size_t elem_size = 1;
  std::size_t chunk_bytes = std::size_t{128} * 1024;
  std::size_t depth = 4;
  bool in_place = false;
};

/// Why `hosts` cannot run the hierarchical schedule ("" when they can): it needs two or more
/// hosts with the same number of ranks each.
std::string hierarchical_unfit(const std::vector<std::vector<int>>& hosts);

/// The plan of `p.rank`; `p.hosts` must be fit (hierarchical_unfit).
Plan hierarchical_allreduce(const HierParams& p);
Plan hierarchical_allgather(const HierParams& p);
/// Scratch: the folded column, (H x count) elements, and a few chunks.
Plan hierarchical_reduce_scatter(const HierParams& p);

}  // namespace loom::algo
