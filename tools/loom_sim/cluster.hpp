// Modelled clusters for loom-sim: hosts x ranks per host, per-link latency and bandwidth, a
// per-host NIC, and the cost table's predictions of ring, tree and the selector's pick on them.
// The schedules' shapes come from the real plan builders (the trees' depth from the same
// double-binary-tree code the library runs), the times from the table the library builds.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.hpp"
#include "selector/cost_table.hpp"
#include "selector/tuning.hpp"

namespace loom::sim {

using select::Algo;
using select::Coll;
using select::CostTable;
using select::Shape;
using select::Tuning;

struct Cluster {
  std::string name;
  std::string description;
  int per_host = 1;  // ranks per host (0: all ranks on one host)
  int cores = 0;     // CPUs per host (0: unlimited)
  bool ofi = false;  // hosts talk over libfabric (LOOM_CHUNK_SIZE=auto then means 512K)
  Tuning tuning;
};

/// "8gpu-4efa", "25gbe" or "local" (one host; `local` is the tuning from the settings, normally
/// the output of `loom-perf --calibrate`, and `local_cores` this machine's CPUs).
Result<Cluster> preset(std::string_view name, const Tuning& local, int local_cores);
std::vector<std::string_view> preset_names();

/// The shape of `nranks` ranks on `c`, with the depth of the trees loom would build for it.
Shape shape_of(const Cluster& c, int nranks);

struct Prediction {
  std::size_t bytes = 0;
  double ring_us = 0;
  double tree_us = -1;  // -1: no tree schedule
  double hier_us = -1;  // -1: no hierarchical schedule, or the shape does not fit it
  Algo pick = Algo::Ring;
  double pick_us = 0;
  double det_us = -1;    // deterministic mode, -1: not a reduction
  double bruck_us = -1;  // Bruck's allgather or reduce-scatter, -1: another collective
};

/// Ring, tree, the selector's pick and deterministic mode for one size, from `table`.
Prediction predict(Coll coll, std::size_t bytes, const CostTable& table);

}  // namespace loom::sim
