// The cost table: the model's predicted time of every (collective, algorithm, path) at four sizes
// per power of two (2^i x 1, 1.25, 1.5, 1.75), computed once when a communicator is created (from
// its shape, its pipeline and the tuning constants) and looked up per call. Between two points
// a time is linear in bytes: each segment is a latency and a bandwidth. As NCCL's
// [coll][algo][proto] tables, with a size axis: loom's links change rate with the buffer size.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "selector/model.hpp"

namespace loom::select {

class CostTable {
 public:
  /// Points from 1 B to 2^kMaxLog2 B, kSteps per power of two; beyond, the last segment's rate.
  static constexpr int kMaxLog2 = 40;
  static constexpr std::size_t kSteps = 4;
  static constexpr std::size_t kPoints = kSteps * kMaxLog2 + 1;
  /// The size of point `k`: 2^(k / kSteps) x (kSteps + k % kSteps) / kSteps bytes.
  static constexpr double point_bytes(std::size_t k) {
    return static_cast<double>(std::uint64_t{1} << (k / kSteps)) *
           static_cast<double>(kSteps + k % kSteps) / kSteps;
  }

  CostTable() = default;
  /// Evaluates the model (model.hpp) at every point of every cell.
  static CostTable build(const Shape& s, const Tuning& t, const Pipeline& p);

  /// Predicted microseconds of `a` for `c` on `bytes`, on the path the transport takes for that
  /// size: -1 when `a` has no schedule for `c` or the shape does not fit it, kNever above the
  /// cell's largest size (recursive doubling: Tuning::rd_max_bytes).
  [[nodiscard]] double time_us(Coll c, Algo a, std::size_t bytes) const;
  /// The path the messages of `a` for `c` take at `bytes`.
  [[nodiscard]] Path path(Coll c, Algo a, std::size_t bytes) const;
  /// The table's time for `path` at point `k` (point_bytes(k) bytes).
  [[nodiscard]] double point_us(Coll c, Algo a, Path path, std::size_t k) const;
  [[nodiscard]] const Shape& shape() const { return shape_; }
  [[nodiscard]] const Pipeline& pipeline() const { return pipeline_; }

 private:
  struct Cell {
    bool supported = false;
    double eager_below = 0;     // buffers below this size take the eager path
    double max_bytes = kNever;  // a candidate up to this size
    std::array<std::array<double, kPoints>, kPaths> us{};  // [path][point]
  };
  [[nodiscard]] const Cell& cell(Coll c, Algo a) const {
    static const Cell kNone{};  // a collective without a schedule family (barrier)
    if (static_cast<std::size_t>(c) >= kColls) return kNone;
    return cells_[static_cast<std::size_t>(c) * kAlgos + static_cast<std::size_t>(a)];
  }

  Shape shape_;
  Pipeline pipeline_;
  std::array<Cell, kColls * kAlgos> cells_{};
};

}  // namespace loom::select
