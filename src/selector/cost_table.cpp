#include "selector/cost_table.hpp"

#include <algorithm>
#include <bit>

#include "selector/catalog.hpp"

namespace loom::select {

CostTable CostTable::build(const Shape& s, const Tuning& t, const Pipeline& p) {
  CostTable table;
  table.shape_ = s;
  table.pipeline_ = p;
  for (std::size_t ci = 0; ci < kColls; ++ci)
    for (std::size_t ai = 0; ai < kAlgos; ++ai) {
      const auto c = static_cast<Coll>(ci);
      const auto a = static_cast<Algo>(ai);
      Cell& cell = table.cells_[ci * kAlgos + ai];
      cell.supported = supports(c, a) && row(a).unfit(s) == nullptr;
      if (!cell.supported) continue;
      cell.eager_below = eager_below(c, a, s, t, p);
      cell.max_bytes = row(a).max_bytes(t);
      for (Path path : {Path::Eager, Path::Direct})
        for (std::size_t i = 0; i < kPoints; ++i)
          cell.us[static_cast<std::size_t>(path)][i] =
              model_us(c, a, path, point_bytes(i), s, t, p);
    }
  return table;
}

Path CostTable::path(Coll c, Algo a, std::size_t bytes) const {
  return static_cast<double>(bytes) < cell(c, a).eager_below ? Path::Eager : Path::Direct;
}

double CostTable::point_us(Coll c, Algo a, Path path, std::size_t k) const {
  return cell(c, a).us[static_cast<std::size_t>(path)][k];
}

double CostTable::time_us(Coll c, Algo a, std::size_t bytes) const {
  const Cell& cl = cell(c, a);
  if (!cl.supported) return -1;
  const auto b = static_cast<double>(std::max<std::size_t>(bytes, 1));
  if (b > cl.max_bytes) return kNever;
  const auto& us = cl.us[static_cast<std::size_t>(path(c, a, bytes))];
  // The segment [point k, point k + 1] around b (the last one beyond the table): 2^i <= b, and b
  // in the q-th of the kSteps equal parts of [2^i, 2^(i+1)).
  const std::size_t whole = std::max<std::size_t>(bytes, 1);
  const auto i = static_cast<std::size_t>(std::bit_width(whole) - 1);
  const std::size_t q = i < kMaxLog2 ? ((whole * kSteps) >> i) - kSteps : 0;
  const std::size_t k = std::min(kSteps * i + q, kPoints - 2);
  const double lo = point_bytes(k);
  return us[k] + (b - lo) * (us[k + 1] - us[k]) / (point_bytes(k + 1) - lo);
}

}  // namespace loom::select
