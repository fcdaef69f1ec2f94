// What running a Plan needs to know of its structure, worked out once per plan instead of once
// per call: each step's dependents, the sends and receives per (peer, direction) in plan
// order, the local steps with nothing to wait for, the peers, and the receives whose only
// reader is a Reduce (which a transport may do as it receives). The planner indexes the plans
// it caches; a run indexes any other plan itself.
#pragma once

#include <cstdint>
#include <vector>

#include "algorithms/plan.hpp"

namespace loom::algo {

struct PlanIndex {
  /// Dependents of step s: dependents[dep_offsets[s] .. dep_offsets[s + 1]).
  std::vector<std::uint32_t> dep_offsets;
  std::vector<std::uint32_t> dependents;
  std::vector<std::uint32_t> dep_counts;  // per step: how many steps it waits for
  struct Lane {
    int peer = -1;
    bool is_send = false;
    std::vector<std::uint32_t> steps;  // in plan order
  };
  std::vector<Lane> lanes;
  std::vector<std::uint32_t> local_ready;  // Copy/Reduce steps without dependencies
  std::vector<int> peers;                  // as Plan::peers()
  /// Per Recv step: the Reduce that reads exactly what it received as its second operand and
  /// is its only dependent (kNoStep otherwise); any_fusable: whether one exists.
  std::vector<std::uint32_t> fusable;
  bool any_fusable = false;
};

PlanIndex index_plan(const Plan& plan);

}  // namespace loom::algo
