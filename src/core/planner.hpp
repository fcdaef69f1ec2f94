// The communicator's planning: which algorithm a call runs (the selector, over the cost table
// built once for the job's shape) and the plan that runs it (the factory in src/algorithms/),
// through a small cache keyed by the call's shape.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "algorithms/plan.hpp"
#include "collective/op.hpp"
#include "config/config.hpp"
#include "loom/options.hpp"
#include "selector/cost_table.hpp"
#include "selector/selector.hpp"
#include "selector/shape.hpp"
#include "selector/tuning.hpp"
#include "topology/topology.hpp"

namespace loom::detail {

/// What shapes plans; every rank must hold the same values (CommImpl checks at creation).
struct PlanSettings {
  std::size_t chunk_bytes = 0;
  std::size_t depth = 4;
  bool buffered_ring_sends = false;  // ring sends through the shm slots, never single copy
  bool deterministic = false;        // LOOM_DETERMINISTIC
  select::Policy policy;             // LOOM_ALGO
  select::Tuning tuning;             // LOOM_TUNE_*, LOOM_TUNING
};

/// The cost model's constants (select::tuning_from: LOOM_TUNE_*, LOOM_TUNING) with what the
/// transports state of their own policy (the registry's cost facts: shm's single-copy threshold
/// and slot order). An error names a bad setting.
Result<select::Tuning> plan_tuning(const config::Config& cfg);

class Planner {
 public:
  /// `ring`: the topology-aware ring order; `topology` gives each rank's host (per-host trees)
  /// and each host's CPUs (the cost model's shape).
  Planner(int rank, int nranks, std::vector<int> ring, const topo::Topology& topology,
          PlanSettings settings);

  /// The plan of one call: chosen by the cost model unless the call, LOOM_ALGO or deterministic
  /// mode fixes the algorithm. Repeated calls of one shape (every training step) reuse the plan.
  std::shared_ptr<const algo::Plan> plan(const coll::OpDesc& op, const CollOptions& opts);

  [[nodiscard]] const std::vector<int>& ring() const { return ring_; }
  [[nodiscard]] const select::Shape& shape() const { return shape_; }

 private:
  algo::Plan make(const coll::OpDesc& op, const CollOptions& opts);
  void log_decision(const coll::OpDesc& op, const select::Decision& d, std::size_t bytes);

  struct PlanKey {
    coll::CollKind kind;
    DataType dtype;
    int root;
    bool in_place;
    std::size_t count;
    Algorithm algorithm;
    friend bool operator==(const PlanKey&, const PlanKey&) = default;
  };

  int rank_;
  int nranks_;
  std::vector<int> ring_;
  std::vector<std::vector<int>> hosts_;  // ranks per host, in ring order (per-host trees)
  select::Shape shape_;
  PlanSettings settings_;
  select::CostTable costs_;
  std::set<std::uint64_t> logged_;  // (collective, size class, algorithm) already logged
  std::vector<std::pair<PlanKey, std::shared_ptr<const algo::Plan>>> plans_;  // most recent last
};

}  // namespace loom::detail
