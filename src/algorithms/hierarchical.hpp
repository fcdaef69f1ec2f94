// Hierarchical allreduce (pure function) for hosts that run several ranks each: a reduce-scatter
// inside each host (local rank j ends with shard j of its host's sum), an allreduce of shard j
// with its counterparts, the local ranks j of the other hosts (a ring over the hosts), and an
// allgather of the shards inside each host. Each host's NICs carry 2 (H - 1) / H of the buffer
// (H hosts), where a ring over all n ranks carries 2 (n - 1) / n, and every local rank drives
// its own stream across hosts, so a host with a NIC per local rank uses them all. The phases
// follow one another; inside a phase the steps are pipelined in chunks. The ring across hosts
// gives every counterpart the same bits, so every rank's result is bitwise identical.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "algorithms/plan.hpp"

namespace loom::algo {

struct HierParams {
  int rank = 0;
  std::vector<std::vector<int>> hosts;  // ranks per host, each host's in its local order
  std::size_t count = 0;                // elements
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

}  // namespace loom::algo
