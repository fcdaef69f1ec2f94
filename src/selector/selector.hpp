// The algorithm selector: LOOM_ALGO (forced choices, also per collective) or the communicator's
// cost table picks, for each call, the fastest of the catalog's rows (catalog.hpp) that serve the
// collective and fit the job; the decision and the predicted times are logged.
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

/// Algorithms the selector leaves out (indexed by Algo).
using AlgoMask = std::array<bool, kAlgos>;

/// A parsed LOOM_ALGO: per collective, a forced algorithm or none (auto), and the algorithms
/// auto leaves out. Grammar: "auto" | a catalog name (ring, tree, rd, hier, ...) | "^name"
/// (never chosen by auto) | entries "coll:algo" separated by commas, where a bare algorithm
/// applies to every collective that has it, e.g. "allreduce:tree,broadcast:ring" or "^hier".
struct Policy {
  std::array<std::optional<Algo>, 5> forced{};
  AlgoMask excluded{};

  static Result<Policy> parse(std::string_view text);
  [[nodiscard]] std::optional<Algo> for_coll(Coll c) const {
    const auto i = static_cast<std::size_t>(c);
    return i < forced.size() ? forced[i] : std::nullopt;  // barrier: nothing to force
  }
};

struct Decision {
  Algo algo = Algo::Ring;
  /// Per catalog row: its predicted time, -1 without a schedule for the collective or where the
  /// job does not fit it, kNever above its size limit.
  std::array<double, kAlgos> us{};
  bool forced = false;
  /// Why a forced algorithm was not taken (nullptr: it was, or none was forced).
  const char* refused = nullptr;

  [[nodiscard]] double us_of(Algo a) const { return us[static_cast<std::size_t>(a)]; }
  /// The predicted time of the chosen algorithm.
  [[nodiscard]] double pick_us() const { return us_of(algo); }
  /// "allreduce of 4096 B on 8 ranks (1 hosts): ring 120.3 us, tree 61.0 us -> tree (auto)"
  [[nodiscard]] std::string describe(Coll c, std::size_t bytes, const Shape& s) const;
};

/// Picks the algorithm for one call: `forced` (a call's hint or LOOM_ALGO) when it has a
/// schedule for `c` that fits the job, else the one `table` predicts fastest but `excluded`
/// (the ring stays a candidate: every collective has it).
Decision choose(Coll c, std::size_t bytes, const CostTable& table, std::optional<Algo> forced,
                const AlgoMask& excluded = {});

}  // namespace loom::select
