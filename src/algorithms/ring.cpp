#include "algorithms/ring.hpp"

#include <algorithm>
#include <numeric>

namespace loom::algo {
namespace {

int mod(long a, int n) {
  return static_cast<int>(((a % n) + n) % n);
}

// Shared geometry of one ring plan: positions, neighbours and chunking.
struct Ring {
  int n = 1;
  int pos = 0;
  int left = 0;
  int right = 0;
  std::vector<int> order;
  std::size_t es = 1;
  std::size_t chunk_elems = 1;
  std::size_t nchunks = 0;
  std::size_t depth = 1;

  // `ring_steps`: the block travels the ring step by step (allreduce, allgather,
  // reduce_scatter), so a small block is cut into parts (step_chunk_elems).
  Ring(const RingParams& p, std::size_t max_block_elems, bool ring_steps = true)
      : n(p.nranks), es(p.elem_size) {
    order = p.order;
    if (order.empty()) {
      order.resize(static_cast<std::size_t>(n));
      std::iota(order.begin(), order.end(), 0);
    }
    pos = static_cast<int>(std::find(order.begin(), order.end(), p.rank) - order.begin());
    left = at(pos - 1);
    right = at(pos + 1);
    chunk_elems = std::max<std::size_t>(1, p.chunk_bytes / es);
    depth = std::max<std::size_t>(1, p.depth);
    if (ring_steps) chunk_elems = step_chunk_elems(p, max_block_elems);
    nchunks = (max_block_elems + chunk_elems - 1) / chunk_elems;
  }
  // Chunk size of a block that travels the ring step by step: with n >= 3 a block of at least
  // `depth` x min_step_part_bytes is cut into `depth` parts, so a rank forwards one part while
  // it still receives and reduces the next (one chunk per step serialises them at every step).
  // Smaller blocks stay whole: two parts per step ran slower than one at 4 ranks on 2 CPUs
  // (32 KiB allreduce 62 us against 37; 128 KiB 130 against 67 in 4 parts).
  [[nodiscard]] std::size_t step_chunk_elems(const RingParams& p, std::size_t block_elems) const {
    if (n < 3 || p.min_step_part_bytes == 0) return chunk_elems;
    if (block_elems * es < depth * p.min_step_part_bytes) return chunk_elems;
    return std::min(chunk_elems, (block_elems + depth - 1) / depth);
  }
  [[nodiscard]] int at(long position) const {
    return order[static_cast<std::size_t>(mod(position, n))];
  }
  // Chunk c of a block of `block.count` elements starting at element `block.first`.
  [[nodiscard]] Block chunk(Block block, std::size_t c) const {
    Block b = split_block(block.count, nchunks, c);
    return {block.first + b.first, b.count};
  }
  [[nodiscard]] Span span(BufId buf, Block b) const { return {buf, b.first * es, b.count * es}; }
  [[nodiscard]] std::size_t slot_bytes() const { return chunk_elems * es; }
};

Plan local_copy_plan(const RingParams& p, std::size_t bytes, std::size_t recv_offset) {
  Plan plan;
  plan.algorithm = "local";
  if (!p.in_place && bytes > 0)
    plan.add(copy_into({BufId::Recv, recv_offset, bytes}, {BufId::Send, 0, bytes}));
  return plan;
}

}  // namespace

Plan ring_allreduce(const RingParams& p) {
  if (p.nranks == 1) return local_copy_plan(p, p.count * p.elem_size, 0);
  const std::size_t n = static_cast<std::size_t>(p.nranks);
  Ring r(p, split_block(p.count, n, 0).count);
  Plan plan;
  plan.algorithm = "ring";
  SlotPool pool(r.slot_bytes(), r.depth);
  plan.scratch_bytes = pool.bytes();
  auto seg = [&](long position) {
    return split_block(p.count, n, static_cast<std::size_t>(mod(position, p.nranks)));
  };
  // Per (segment, chunk): the step that last wrote it and the last send that read it.
  std::vector<std::uint32_t> producer(n * r.nchunks, kNoStep), reader(n * r.nchunks, kNoStep);
  auto key = [&](long position, std::size_t c) {
    return static_cast<std::size_t>(mod(position, p.nranks)) * r.nchunks + c;
  };

  for (std::size_t g = 0; g < r.nchunks; g += r.depth) {
    const std::size_t gend = std::min(r.nchunks, g + r.depth);
    for (int s = 0; s + 1 < p.nranks; ++s) {  // reduce-scatter
      for (std::size_t c = g; c < gend; ++c) {
        long sp = r.pos - s, rp = r.pos - s - 1;
        Block sb = r.chunk(seg(sp), c), rb = r.chunk(seg(rp), c);
        if (sb.count > 0) {
          Span src = r.span(s == 0 ? BufId::Send : BufId::Recv, sb);
          reader[key(sp, c)] = plan.add(send_to(r.right, src), {producer[key(sp, c)]});
        }
        if (rb.count == 0) continue;
        auto slot = pool.acquire();
        Span tmp{BufId::Scratch, slot.span.offset, rb.count * r.es};
        auto recv = plan.add(recv_from(r.left, tmp), {slot.free_after});
        auto red =
            plan.add(reduce_into(r.span(BufId::Recv, rb), r.span(BufId::Send, rb), tmp), {recv});
        pool.release(slot.index, red);
        producer[key(rp, c)] = red;
      }
    }
    for (int s = 0; s + 1 < p.nranks; ++s) {  // allgather
      for (std::size_t c = g; c < gend; ++c) {
        long sp = r.pos + 1 - s, rp = r.pos - s;
        Block sb = r.chunk(seg(sp), c), rb = r.chunk(seg(rp), c);
        if (sb.count > 0)
          plan.add(send_to(r.right, r.span(BufId::Recv, sb)), {producer[key(sp, c)]});
        if (rb.count > 0)
          producer[key(rp, c)] =
              plan.add(recv_from(r.left, r.span(BufId::Recv, rb)), {reader[key(rp, c)]});
      }
    }
  }
  return plan;
}

Plan ring_allgather(const RingParams& p) {
  const std::size_t block_bytes = p.count * p.elem_size;
  const std::size_t self_offset = static_cast<std::size_t>(p.rank) * block_bytes;
  if (p.nranks == 1) return local_copy_plan(p, block_bytes, 0);
  Ring r(p, p.count);
  Plan plan = local_copy_plan(p, block_bytes, self_offset);
  plan.algorithm = "ring";
  auto block = [&](long position) {
    return Block{static_cast<std::size_t>(r.at(position)) * p.count, p.count};
  };
  std::vector<std::uint32_t> producer(static_cast<std::size_t>(p.nranks) * r.nchunks, kNoStep);
  auto key = [&](long position, std::size_t c) {
    return static_cast<std::size_t>(r.at(position)) * r.nchunks + c;
  };
  for (std::size_t g = 0; g < r.nchunks; g += r.depth) {
    const std::size_t gend = std::min(r.nchunks, g + r.depth);
    for (int s = 0; s + 1 < p.nranks; ++s) {
      for (std::size_t c = g; c < gend; ++c) {
        long sp = r.pos - s, rp = r.pos - s - 1;
        Block sb = r.chunk(block(sp), c), rb = r.chunk(block(rp), c);
        if (sb.count > 0) {
          Span src = r.span(BufId::Recv, sb);
          if (s == 0 && !p.in_place) src = r.span(BufId::Send, r.chunk({0, p.count}, c));
          plan.add(send_to(r.right, src), {producer[key(sp, c)]});
        }
        if (rb.count > 0)
          producer[key(rp, c)] = plan.add(recv_from(r.left, r.span(BufId::Recv, rb)));
      }
    }
  }
  return plan;
}

Plan ring_reduce_scatter(const RingParams& p) {
  const std::size_t block_bytes = p.count * p.elem_size;
  if (p.nranks == 1) return local_copy_plan(p, block_bytes, 0);
  Ring r(p, p.count);
  Plan plan;
  plan.algorithm = "ring";
  // Partial sums live in scratch: two slots per chunk of a group (the one being sent on, the one
  // being received into).
  SlotPool pool(r.slot_bytes(), 2 * r.depth);
  plan.scratch_bytes = pool.bytes();
  auto block = [&](long position) {
    return Block{static_cast<std::size_t>(r.at(position)) * p.count, p.count};
  };
  std::vector<std::uint32_t> producer(r.depth, kNoStep);  // per chunk of the group
  for (std::size_t g = 0; g < r.nchunks; g += r.depth) {
    const std::size_t gend = std::min(r.nchunks, g + r.depth);
    for (int s = 0; s + 1 < p.nranks; ++s) {
      const bool last = s + 2 == p.nranks;
      for (std::size_t c = g; c < gend; ++c) {
        const std::size_t i = c - g;
        Block own = r.chunk({0, p.count}, c);
        if (own.count == 0) continue;
        Block sb = r.chunk(block(r.pos - s - 1), c), rb = r.chunk(block(r.pos - s - 2), c);
        auto held = pool.take(2 * i + static_cast<std::size_t>((s + 1) % 2));
        Span held_span{BufId::Scratch, held.span.offset, own.count * r.es};
        Span src = s == 0 ? r.span(BufId::Send, sb) : held_span;
        auto send = plan.add(send_to(r.right, src), {s == 0 ? kNoStep : producer[i]});
        if (s > 0) pool.release(held.index, send);
        auto slot = pool.take(2 * i + static_cast<std::size_t>(s % 2));
        Span tmp{BufId::Scratch, slot.span.offset, own.count * r.es};
        auto recv = plan.add(recv_from(r.left, tmp), {slot.free_after});
        Span dst = last ? r.span(BufId::Recv, own) : tmp;
        producer[i] = plan.add(reduce_into(dst, r.span(BufId::Send, rb), tmp), {recv});
        if (last) pool.release(slot.index, producer[i]);
      }
    }
  }
  return plan;
}

Plan chain_broadcast(const RingParams& p) {
  const std::size_t bytes = p.count * p.elem_size;
  Plan plan;
  plan.algorithm = "chain";
  if (p.rank == p.root && !p.in_place && bytes > 0)
    plan.add(copy_into({BufId::Recv, 0, bytes}, {BufId::Send, 0, bytes}));
  if (p.nranks == 1) return plan;
  Ring r(p, p.count, false);
  const int root_pos =
      static_cast<int>(std::find(r.order.begin(), r.order.end(), p.root) - r.order.begin());
  const int k = mod(r.pos - root_pos, p.nranks);  // 0 = root, n-1 = end of the chain
  for (std::size_t c = 0; c < r.nchunks; ++c) {
    Block b = r.chunk({0, p.count}, c);
    if (b.count == 0) continue;
    std::uint32_t got = kNoStep;
    if (k > 0) got = plan.add(recv_from(r.left, r.span(BufId::Recv, b)));
    if (k + 1 < p.nranks)
      plan.add(send_to(r.right, r.span(k == 0 ? BufId::Send : BufId::Recv, b)), {got});
  }
  return plan;
}

Plan chain_reduce(const RingParams& p) {
  const std::size_t bytes = p.count * p.elem_size;
  if (p.nranks == 1) return local_copy_plan(p, bytes, 0);
  Ring r(p, p.count, false);
  Plan plan;
  plan.algorithm = "chain";
  SlotPool pool(r.slot_bytes(), r.depth);
  plan.scratch_bytes = pool.bytes();
  const int root_pos =
      static_cast<int>(std::find(r.order.begin(), r.order.end(), p.root) - r.order.begin());
  const int k = mod(r.pos - root_pos - 1, p.nranks);  // 0 = start of the chain, n-1 = root
  for (std::size_t c = 0; c < r.nchunks; ++c) {
    Block b = r.chunk({0, p.count}, c);
    if (b.count == 0) continue;
    if (k == 0) {
      plan.add(send_to(r.right, r.span(BufId::Send, b)));
      continue;
    }
    auto slot = pool.acquire();
    Span tmp{BufId::Scratch, slot.span.offset, b.count * r.es};
    auto recv = plan.add(recv_from(r.left, tmp), {slot.free_after});
    const bool is_root = k + 1 == p.nranks;
    Span dst = is_root ? r.span(BufId::Recv, b) : tmp;
    auto red = plan.add(reduce_into(dst, r.span(BufId::Send, b), tmp), {recv});
    pool.release(slot.index, is_root ? red : plan.add(send_to(r.right, tmp), {red}));
  }
  return plan;
}

Plan dissemination_barrier(int rank, int nranks) {
  Plan plan;
  plan.algorithm = "dissemination";
  std::uint32_t prev = kNoStep;
  for (int dist = 1; dist < nranks; dist *= 2) {
    plan.add(send_to(mod(rank + dist, nranks), {BufId::Scratch, 0, 0}), {prev});
    prev = plan.add(recv_from(mod(rank - dist, nranks), {BufId::Scratch, 0, 0}), {prev});
  }
  return plan;
}

}  // namespace loom::algo
