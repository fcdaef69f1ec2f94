#include <algorithm>

#include "algorithms/bruck.hpp"

namespace loom::algo {
namespace {

// Where relative block i's partial sum lives before round k: in the accumulator (scratch, by
// relative index) once an earlier round folded into it, else in the input (by rank).
struct Partials {
  const bruck::Geometry& g;
  std::size_t block = 0;
  int folded = 0;  // relative blocks [0, folded) are in the accumulator

  [[nodiscard]] Span of(const bruck::Run& r) const {
    const auto len = static_cast<std::size_t>(r.len) * block;
    if (r.first < folded) return {BufId::Scratch, static_cast<std::size_t>(r.first) * block, len};
    return {BufId::Send, static_cast<std::size_t>(r.rank) * block, len};
  }
};

}  // namespace

Plan bruck_reduce_scatter(const RingParams& p) {
  Plan plan;
  plan.algorithm = "bruck";
  const std::size_t block = p.count * p.elem_size;
  const bruck::Geometry g(p);
  if (block == 0) return plan;
  if (g.n == 1) {
    if (!p.in_place) plan.add(copy_into({BufId::Recv, 0, block}, {BufId::Send, 0, block}));
    return plan;
  }
  const int rounds = g.rounds();
  // Scratch: the accumulator (relative blocks below the largest round's count), then each
  // round's incoming partial sums in a region of its own, so every receive is posted at once.
  int acc_blocks = 0;
  for (int k = 0; k < rounds; ++k) acc_blocks = std::max(acc_blocks, g.moved(k));
  std::vector<std::size_t> in_at(static_cast<std::size_t>(rounds));
  std::size_t scratch = static_cast<std::size_t>(acc_blocks) * block;
  for (int k = rounds - 1; k >= 0; --k) {
    in_at[static_cast<std::size_t>(k)] = scratch;
    scratch += static_cast<std::size_t>(g.moved(k)) * block;
  }
  plan.scratch_bytes = scratch;

  Partials mine{g, block, 0};
  std::vector<std::uint32_t> folds;  // the previous round's reductions
  for (int k = rounds - 1; k >= 0; --k) {
    const int dist = 1 << k, c = g.moved(k);
    for (const bruck::Run& r : bruck::runs(g, g.pos, dist, c, mine.folded))
      bruck::add_after(plan, send_to(g.rank_at(g.pos + dist), mine.of(r)), folds);
    // The sender's runs (its own layout), each received into this round's region at its
    // relative place, then folded into this rank's partial sums run by run.
    const long from = g.pos - dist;
    const Partials theirs{g, block, mine.folded};
    std::vector<std::uint32_t> now;
    for (const bruck::Run& in : bruck::runs(g, from, dist, c, theirs.folded)) {
      const std::size_t at =
          in_at[static_cast<std::size_t>(k)] + static_cast<std::size_t>(in.first - dist) * block;
      const auto recv = plan.add(recv_from(
          g.rank_at(from), {BufId::Scratch, at, static_cast<std::size_t>(in.len) * block}));
      // This rank's relative blocks [in.first - dist, + in.len), in its own runs.
      for (const bruck::Run& own : bruck::runs(g, g.pos, in.first - dist, in.len, mine.folded)) {
        const auto len = static_cast<std::size_t>(own.len) * block;
        const Span incoming{BufId::Scratch,
                            at + static_cast<std::size_t>(own.first - (in.first - dist)) * block,
                            len};
        const Span dst =
            k == 0 ? Span{BufId::Recv, 0, len}
                   : Span{BufId::Scratch, static_cast<std::size_t>(own.first) * block, len};
        std::vector<std::uint32_t> deps = folds;
        deps.push_back(recv);
        now.push_back(bruck::add_after(plan, reduce_into(dst, mine.of(own), incoming), deps));
      }
    }
    folds = std::move(now);
    mine.folded = std::max(mine.folded, c);
  }
  return plan;
}

}  // namespace loom::algo
