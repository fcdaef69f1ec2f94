#include "algorithms/deterministic.hpp"

#include <algorithm>
#include <numeric>

#include "collective/kinds.hpp"

namespace loom::algo {
namespace {

using coll::CollKind;

// The geometry of one deterministic plan: the slice each rank owns and its chunks.
struct Det {
  const RingParams& p;
  CollKind kind;  // AllReduce, ReduceScatter or Reduce
  int n;
  int me;
  std::size_t es;
  std::size_t chunk_elems = 1;
  std::size_t nchunks = 0;

  // Receive slots per chunk of the own slice (n-1 parts, plus an accumulator beyond 2 ranks),
  // and chunks of it in flight.
  std::size_t slots_per_chunk;
  std::size_t rounds;

  Det(const RingParams& params, CollKind k)
      : p(params),
        kind(k),
        n(params.nranks),
        me(params.rank),
        es(params.elem_size),
        slots_per_chunk(static_cast<std::size_t>(n - 1) + (n > 2 ? 1 : 0)),
        rounds(std::clamp<std::size_t>(params.depth, 1,
                                       std::max<std::size_t>(1, 64 / slots_per_chunk))) {
    // The fold keeps slots_per_chunk x rounds chunks in flight: at most kFoldBytes of them, so
    // the parts being folded stay in the CPU's cache (8 ranks with 128 KiB chunks would span
    // 4 MiB). The fold order, hence the result, does not depend on the chunk size.
    const std::size_t cap = std::max<std::size_t>(4096, kFoldBytes / (slots_per_chunk * rounds));
    chunk_elems = std::max<std::size_t>(1, std::min(p.chunk_bytes, cap) / es);
    std::size_t biggest = kind == CollKind::ReduceScatter ? p.count : block(0).count;
    nchunks = (biggest + chunk_elems - 1) / chunk_elems;
  }
  static constexpr std::size_t kFoldBytes = std::size_t{1} << 20;
  // Slice q, in elements of the send buffer.
  [[nodiscard]] Block block(int q) const {
    if (kind == CollKind::ReduceScatter) return {static_cast<std::size_t>(q) * p.count, p.count};
    return split_block(p.count, static_cast<std::size_t>(n), static_cast<std::size_t>(q));
  }
  [[nodiscard]] Block chunk(int q, std::size_t c) const {
    Block b = block(q);
    Block s = split_block(b.count, nchunks, c);
    return {b.first + s.first, s.count};
  }
  [[nodiscard]] Span span(BufId buf, Block b) const { return {buf, b.first * es, b.count * es}; }
};

struct Scatter {
  // sent[q * nchunks + c]: the send of this rank's contribution to chunk c of slice q.
  std::vector<std::uint32_t> sent;
  // folded[c]: the step that wrote the final value of chunk c of this rank's slice.
  std::vector<std::uint32_t> folded;
};

// Phase 1: sends this rank's part of every other slice to its owner; receives all parts of its
// own slice and folds them in rank order into `result(c)`.
template <typename ResultSpan>
Scatter reduce_scatter_phase(Plan& plan, const Det& d, std::size_t scratch_base,
                             ResultSpan result) {
  SlotPool pool(d.chunk_elems * d.es, d.slots_per_chunk * d.rounds, scratch_base);
  plan.scratch_bytes = std::max(plan.scratch_bytes, scratch_base + pool.bytes());
  Scatter out;
  out.sent.assign(static_cast<std::size_t>(d.n) * d.nchunks, kNoStep);
  out.folded.assign(d.nchunks, kNoStep);
  for (std::size_t c = 0; c < d.nchunks; ++c) {
    for (int s = 1; s < d.n; ++s) {  // staggered, so no rank is everyone's first target
      int q = (d.me + s) % d.n;
      Block b = d.chunk(q, c);
      if (b.count > 0)
        out.sent[static_cast<std::size_t>(q) * d.nchunks + c] =
            plan.add(send_to(q, d.span(BufId::Send, b)));
    }
    Block mine = d.chunk(d.me, c);
    if (mine.count == 0) continue;
    const std::size_t bytes = mine.count * d.es;
    // Each part is received only once the fold before it is done, so the fold that consumes it
    // waits for that receive alone: a transport that reduces on receipt (shm) then folds
    // straight out of its own buffers. The senders are not held back: their messages wait in
    // the transport (shm slots, socket buffers) and every chunk's chain runs independently.
    SlotPool::Slot acc{0, {}, kNoStep};
    if (d.n > 2) acc = pool.acquire();
    const Span acc_span{BufId::Scratch, acc.span.offset, bytes};
    auto receive = [&](int q, std::uint32_t after) {
      auto slot = pool.acquire();
      Span tmp{BufId::Scratch, slot.span.offset, bytes};
      return std::make_pair(
          slot.index, std::make_pair(tmp, plan.add(recv_from(q, tmp), {slot.free_after, after})));
    };
    Span a = d.span(BufId::Send, mine);
    std::uint32_t got0 = kNoStep;
    std::size_t slot0 = 0;
    if (d.me != 0) {
      auto [idx, r] = receive(0, kNoStep);
      slot0 = idx;
      a = r.first;
      got0 = r.second;
    }
    std::uint32_t last = acc.free_after;
    for (int q = 1; q < d.n; ++q) {  // ((x0 + x1) + x2) + ... in rank order
      Span b = d.span(BufId::Send, mine);
      std::uint32_t got = kNoStep;
      std::size_t slot = 0;
      if (q != d.me) {
        auto [idx, r] = receive(q, q == 1 ? got0 : last);
        slot = idx;
        b = r.first;
        got = r.second;
      }
      Span dst = q + 1 == d.n ? result(c, mine) : acc_span;
      last = plan.add(reduce_into(dst, a, b), {last, got0, got});
      if (q == 1 && d.me != 0) pool.release(slot0, last);
      if (q != d.me) pool.release(slot, last);
      a = acc_span;
    }
    if (d.n > 2) pool.release(acc.index, last);
    out.folded[c] = last;
  }
  return out;
}

Plan local_copy(const RingParams& p, std::size_t bytes) {
  Plan plan;
  plan.algorithm = "local";
  if (!p.in_place && bytes > 0)
    plan.add(copy_into({BufId::Recv, 0, bytes}, {BufId::Send, 0, bytes}));
  return plan;
}

std::vector<int> ring_order(const RingParams& p) {
  std::vector<int> order = p.order;
  if (order.empty()) {
    order.resize(static_cast<std::size_t>(p.nranks));
    std::iota(order.begin(), order.end(), 0);
  }
  return order;
}

}  // namespace

Plan deterministic_reduce_scatter(const RingParams& p) {
  if (p.nranks == 1) return local_copy(p, p.count * p.elem_size);
  Det d(p, CollKind::ReduceScatter);
  Plan plan;
  plan.algorithm = "deterministic";
  (void)reduce_scatter_phase(plan, d, 0, [&](std::size_t c, Block) {
    Block own = split_block(p.count, d.nchunks, c);
    return d.span(BufId::Recv, own);
  });
  return plan;
}

Plan deterministic_allreduce(const RingParams& p) {
  if (p.nranks == 1) return local_copy(p, p.count * p.elem_size);
  Det d(p, CollKind::AllReduce);
  Plan plan;
  plan.algorithm = "deterministic";
  Scatter sc = reduce_scatter_phase(plan, d, 0,
                                    [&](std::size_t, Block b) { return d.span(BufId::Recv, b); });
  // Phase 2: ring allgather of the slices (copies only, so the bits stay the same).
  const std::vector<int> order = ring_order(p);
  const int n = p.nranks;
  const int pos = static_cast<int>(std::find(order.begin(), order.end(), p.rank) - order.begin());
  auto at = [&](int position) { return order[static_cast<std::size_t>(((position % n) + n) % n)]; };
  const int right = at(pos + 1), left = at(pos - 1);
  // producer[q * nchunks + c]: the step after which chunk c of slice q is in Recv here.
  std::vector<std::uint32_t> producer(static_cast<std::size_t>(n) * d.nchunks, kNoStep);
  for (std::size_t c = 0; c < d.nchunks; ++c)
    producer[static_cast<std::size_t>(p.rank) * d.nchunks + c] = sc.folded[c];
  const std::size_t depth = std::max<std::size_t>(1, p.depth);
  for (std::size_t g = 0; g < d.nchunks; g += depth)
    for (int s = 0; s + 1 < n; ++s)
      for (std::size_t c = g; c < std::min(d.nchunks, g + depth); ++c) {
        const int sq = at(pos - s), rq = at(pos - s - 1);
        Block sb = d.chunk(sq, c), rb = d.chunk(rq, c);
        if (sb.count > 0)
          plan.add(send_to(right, d.span(BufId::Recv, sb)),
                   {producer[static_cast<std::size_t>(sq) * d.nchunks + c]});
        if (rb.count > 0) {
          const std::size_t k = static_cast<std::size_t>(rq) * d.nchunks + c;
          producer[k] = plan.add(recv_from(left, d.span(BufId::Recv, rb)), {sc.sent[k]});
        }
      }
  return plan;
}

Plan deterministic_reduce(const RingParams& p) {
  if (p.nranks == 1) return local_copy(p, p.count * p.elem_size);
  Det d(p, CollKind::Reduce);
  Plan plan;
  plan.algorithm = "deterministic";
  const bool is_root = p.rank == p.root;
  // Off the root, the slice is folded into scratch (Recv may be null there), then sent.
  const std::size_t held = is_root ? 0 : d.block(p.rank).count * d.es;
  const Block own = d.block(p.rank);
  auto result = [&](std::size_t, Block b) {
    if (is_root) return d.span(BufId::Recv, b);
    return Span{BufId::Scratch, (b.first - own.first) * d.es, b.count * d.es};
  };
  Scatter sc = reduce_scatter_phase(plan, d, held, result);
  for (std::size_t c = 0; c < d.nchunks; ++c) {  // phase 2: gather the slices at the root
    if (!is_root) {
      Block b = d.chunk(p.rank, c);
      if (b.count > 0) plan.add(send_to(p.root, result(c, b)), {sc.folded[c]});
      continue;
    }
    for (int q = 0; q < p.nranks; ++q) {
      Block b = d.chunk(q, c);
      if (q == p.rank || b.count == 0) continue;
      plan.add(recv_from(q, d.span(BufId::Recv, b)),
               {sc.sent[static_cast<std::size_t>(q) * d.nchunks + c]});
    }
  }
  return plan;
}

}  // namespace loom::algo
