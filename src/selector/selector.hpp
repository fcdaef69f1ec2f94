// The algorithm selector: LOOM_ALGO (forced choices, also per collective) or the communicator's
// cost table picks ring, tree or recursive doubling (rd) for each call; the decision and the
// predicted times are logged.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.hpp"
#include "config/config.hpp"
#include "selector/cost_table.hpp"
#include "selector/plan_policy.hpp"
#include "selector/tuning.hpp"

namespace loom::select {

/// A parsed LOOM_ALGO: per collective, a forced algorithm or none (auto).
/// Grammar: "auto" | "ring" | "tree" | "rd" | entries "coll:algo" separated by commas, where a bare
/// algorithm applies to every collective that has it, e.g. "allreduce:tree,broadcast:ring".
struct Policy {
  std::array<std::optional<Algo>, 5> forced{};

  static Result<Policy> parse(std::string_view text);
  [[nodiscard]] std::optional<Algo> for_coll(Coll c) const {
    const auto i = static_cast<std::size_t>(c);
    return i < forced.size() ? forced[i] : std::nullopt;  // barrier: nothing to force
  }
};

struct Decision {
  Algo algo = Algo::Ring;
  double ring_us = 0;
  double tree_us = -1;  // -1: no tree schedule for this collective
  double rd_us = -1;    // -1: no recursive doubling schedule (kNever: above rd_max_bytes)
  bool forced = false;
  /// The predicted time of the chosen algorithm.
  [[nodiscard]] double pick_us() const;
  /// "allreduce of 4096 B on 8 ranks (1 host): ring 120.3 us, tree 61.0 us -> tree (auto)"
  [[nodiscard]] std::string describe(Coll c, std::size_t bytes, const Shape& s) const;
};

/// Picks the algorithm for one call: `forced` (a call's hint or LOOM_ALGO) when it has a
/// schedule for `c`, else the one `table` predicts fastest (three lookups).
Decision choose(Coll c, std::size_t bytes, const CostTable& table, std::optional<Algo> forced);

}  // namespace loom::select
