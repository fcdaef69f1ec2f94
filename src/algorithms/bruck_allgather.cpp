#include <algorithm>
#include <bit>
#include <numeric>

#include "algorithms/bruck.hpp"

namespace loom::algo {
namespace bruck {

Geometry::Geometry(const RingParams& p) : n(p.nranks), order(p.order) {
  if (order.empty()) {
    order.resize(static_cast<std::size_t>(n));
    std::iota(order.begin(), order.end(), 0);
  }
  pos = static_cast<int>(std::find(order.begin(), order.end(), p.rank) - order.begin());
}

int Geometry::rank_at(long position) const {
  return order[static_cast<std::size_t>(((position % n) + n) % n)];
}

int Geometry::rounds() const {
  return n <= 1 ? 0 : std::bit_width(static_cast<unsigned>(n - 1));
}

int Geometry::moved(int k) const {
  return std::min(1 << k, n - (1 << k));
}

std::vector<Run> runs(const Geometry& g, long at, int first, int len, int cut) {
  std::vector<Run> out;
  for (int i = first; i < first + len; ++i) {
    const int rank = g.rank_at(at + i);
    const bool joins = !out.empty() && out.back().rank + out.back().len == rank && i != cut;
    if (joins)
      ++out.back().len;
    else
      out.push_back({i, 1, rank});
  }
  return out;
}

std::uint32_t add_after(Plan& plan, Step step, const std::vector<std::uint32_t>& deps) {
  step.dep_begin = static_cast<std::uint32_t>(plan.deps.size());
  step.dep_count = 0;
  for (std::uint32_t d : deps)
    if (d != kNoStep) {
      plan.deps.push_back(d);
      ++step.dep_count;
    }
  plan.steps.push_back(step);
  return static_cast<std::uint32_t>(plan.steps.size() - 1);
}

}  // namespace bruck

Plan bruck_allgather(const RingParams& p) {
  Plan plan;
  plan.algorithm = "bruck";
  const std::size_t block = p.count * p.elem_size;
  const bruck::Geometry g(p);
  auto span = [&](const bruck::Run& r) {
    return Span{BufId::Recv, static_cast<std::size_t>(r.rank) * block,
                static_cast<std::size_t>(r.len) * block};
  };
  // Every step that wrote a block this rank holds: its own block's copy, the rounds' receives.
  std::vector<std::uint32_t> held;
  if (!p.in_place && block > 0)
    held.push_back(plan.add(copy_into(
        {BufId::Recv, static_cast<std::size_t>(p.rank) * block, block}, {BufId::Send, 0, block})));
  if (block == 0) return plan;
  std::vector<std::uint32_t> got;
  for (int k = 0; k < g.rounds(); ++k) {
    const int dist = 1 << k, c = g.moved(k);
    for (const bruck::Run& r : bruck::runs(g, g.pos, 0, c)) {
      Span src = span(r);
      // Round 0 sends the input itself, which needs no copy first.
      if (k == 0 && !p.in_place) src = {BufId::Send, 0, block};
      bruck::add_after(plan, send_to(g.rank_at(g.pos - dist), src),
                       k == 0 ? std::vector<std::uint32_t>{} : held);
    }
    for (const bruck::Run& r : bruck::runs(g, g.pos, dist, c))
      got.push_back(plan.add(recv_from(g.rank_at(g.pos + dist), span(r))));
    held.insert(held.end(), got.begin(), got.end());
    got.clear();
  }
  return plan;
}

}  // namespace loom::algo
