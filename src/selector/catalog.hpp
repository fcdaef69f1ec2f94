// The catalog of algorithms: one row per schedule family (coll::Algo), the only list of them.
// The selector weighs the rows it may choose, LOOM_ALGO and the tools (loom-perf --algo and
// --compare-algos, loom-sim) name them through it, the cost table costs each row's cells, and
// the plan factory (algorithms/factory.cpp) builds each row's plans. Adding an algorithm is its
// schedule file, its row here and in the factory, and its tests.
#pragma once

#include <optional>
#include <span>
#include <string_view>

#include "selector/model.hpp"
#include "selector/shape.hpp"
#include "selector/tuning.hpp"

namespace loom::select {

/// Predicted microseconds of one algorithm for `c` on a buffer of `bytes` along `path`.
using CostFn = double (*)(Coll c, Path path, double bytes, const Shape& s, const Tuning& t,
                          const Pipeline& p);

struct AlgoRow {
  Algo algo = Algo::Ring;
  std::string_view name;         // LOOM_ALGO, --algo, --compare-algos, logs
  std::string_view alias;        // a second spelling accepted ("": none)
  std::string_view description;  // what it is, for help texts
  bool by_cost = true;           // the selector weighs it (deterministic: LOOM_DETERMINISTIC)
  bool (*serves)(Coll c) = nullptr;
  /// Why a job of shape `s` cannot run it (nullptr: it can).
  const char* (*unfit)(const Shape& s) = nullptr;
  CostFn cost = nullptr;
  /// A message of the schedule is the buffer / this, at most a chunk (the eager threshold).
  double (*message_divisor)(Coll c, const Shape& s) = nullptr;
  /// The largest buffer the selector gives it (kNever: no limit).
  double (*max_bytes)(const Tuning& t) = nullptr;
  /// What it needs of the transports.
  std::string_view needs = "send and receive between every pair of its peers";
};

/// Every row, in coll::Algo order.
std::span<const AlgoRow> catalog();
const AlgoRow& row(Algo a);
/// The row named `name` (or its alias), nullptr for none.
const AlgoRow* find_row(std::string_view name);
/// "ring, tree, rd, hier": the names the selector weighs, for messages.
std::string_view algo_names();

}  // namespace loom::select
