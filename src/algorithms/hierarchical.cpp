#include "algorithms/hierarchical.hpp"

#include <algorithm>

#include "algorithms/ring.hpp"

namespace loom::algo {
namespace {

// Where this rank sits: host `host` of `nhosts`, local index `local` of `nlocal`.
struct Place {
  int host = 0;
  int local = 0;
  int nhosts = 1;
  int nlocal = 1;
};

Place place_of(const HierParams& p) {
  Place at;
  at.nhosts = static_cast<int>(p.hosts.size());
  at.nlocal = static_cast<int>(p.hosts.front().size());
  for (int h = 0; h < at.nhosts; ++h) {
    const auto& ranks = p.hosts[static_cast<std::size_t>(h)];
    auto it = std::find(ranks.begin(), ranks.end(), p.rank);
    if (it == ranks.end()) continue;
    at.host = h;
    at.local = static_cast<int>(it - ranks.begin());
  }
  return at;
}

int wrap(long i, int n) {
  return static_cast<int>(((i % n) + n) % n);
}

// The chunks of the local phases: shard i of the buffer (split_block over the local ranks) cut
// into `nchunks` pieces, each at most a chunk.
struct Shards {
  std::size_t count = 0;
  std::size_t es = 1;
  int nlocal = 1;
  std::size_t nchunks = 1;
  std::size_t chunk_elems = 1;

  [[nodiscard]] Block shard(long i) const {
    return split_block(count, static_cast<std::size_t>(nlocal),
                       static_cast<std::size_t>(wrap(i, nlocal)));
  }
  [[nodiscard]] Block piece(long i, std::size_t c) const {
    const Block s = shard(i);
    const Block b = split_block(s.count, nchunks, c);
    return {s.first + b.first, b.count};
  }
  [[nodiscard]] Span span(BufId buf, Block b) const { return {buf, b.first * es, b.count * es}; }
};

// Adds a step that waits for every step from `from` on that no later step waits for: the end of
// a phase (a copy of no bytes).
std::uint32_t join(Plan& plan, std::size_t from) {
  std::vector<bool> waited(plan.steps.size(), false);
  for (std::size_t i = from; i < plan.steps.size(); ++i) {
    const Step& s = plan.steps[i];
    for (std::uint32_t d = 0; d < s.dep_count; ++d) waited[plan.deps[s.dep_begin + d]] = true;
  }
  Step end = copy_into({BufId::Recv, 0, 0}, {BufId::Recv, 0, 0});
  end.dep_begin = static_cast<std::uint32_t>(plan.deps.size());
  for (std::size_t i = from; i < plan.steps.size(); ++i)
    if (!waited[i]) {
      plan.deps.push_back(static_cast<std::uint32_t>(i));
      ++end.dep_count;
    }
  plan.steps.push_back(end);
  return static_cast<std::uint32_t>(plan.steps.size() - 1);
}

// Reduce-scatter inside the host, a ring of the local ranks: local rank j ends with shard j of
// the host's sum in Recv. Partial sums travel in scratch slots from `scratch`.
void local_reduce_scatter(Plan& plan, const Shards& sh, const Place& at,
                          const std::vector<int>& ranks, std::size_t depth, std::size_t scratch) {
  const int j = at.local;
  const int right = ranks[static_cast<std::size_t>(wrap(j + 1, at.nlocal))];
  const int left = ranks[static_cast<std::size_t>(wrap(j - 1, at.nlocal))];
  SlotPool pool(sh.chunk_elems * sh.es, 2 * depth, scratch);
  std::vector<std::uint32_t> producer(depth, kNoStep);  // per chunk of the group
  for (std::size_t g = 0; g < sh.nchunks; g += depth) {
    const std::size_t gend = std::min(sh.nchunks, g + depth);
    for (int s = 0; s + 1 < at.nlocal; ++s) {
      const bool last = s + 2 == at.nlocal;
      for (std::size_t c = g; c < gend; ++c) {
        const std::size_t i = c - g;
        const Block sb = sh.piece(j - s - 1, c), rb = sh.piece(j - s - 2, c);
        auto held = pool.take(2 * i + static_cast<std::size_t>((s + 1) % 2));
        if (sb.count > 0) {
          const Span src = s == 0 ? sh.span(BufId::Send, sb)
                                  : Span{BufId::Scratch, held.span.offset, sb.count * sh.es};
          const auto send = plan.add(send_to(right, src), {s == 0 ? kNoStep : producer[i]});
          if (s > 0) pool.release(held.index, send);
        }
        producer[i] = kNoStep;
        if (rb.count == 0) continue;
        auto slot = pool.take(2 * i + static_cast<std::size_t>(s % 2));
        const Span tmp{BufId::Scratch, slot.span.offset, rb.count * sh.es};
        const auto recv = plan.add(recv_from(left, tmp), {slot.free_after});
        const Span dst = last ? sh.span(BufId::Recv, rb) : tmp;
        producer[i] = plan.add(reduce_into(dst, sh.span(BufId::Send, rb), tmp), {recv});
        pool.release(slot.index, producer[i]);
      }
    }
  }
}

// Allgather of the shards inside the host, in Recv: a ring of the local ranks.
void local_allgather(Plan& plan, const Shards& sh, const Place& at, const std::vector<int>& ranks,
                     std::uint32_t after) {
  const int j = at.local;
  const int right = ranks[static_cast<std::size_t>(wrap(j + 1, at.nlocal))];
  const int left = ranks[static_cast<std::size_t>(wrap(j - 1, at.nlocal))];
  std::vector<std::uint32_t> got(static_cast<std::size_t>(at.nlocal) * sh.nchunks, kNoStep);
  auto key = [&](long shard, std::size_t c) {
    return static_cast<std::size_t>(wrap(shard, at.nlocal)) * sh.nchunks + c;
  };
  for (std::size_t c = 0; c < sh.nchunks; ++c)
    for (int s = 0; s + 1 < at.nlocal; ++s) {
      const Block sb = sh.piece(j - s, c), rb = sh.piece(j - s - 1, c);
      if (sb.count > 0)
        plan.add(send_to(right, sh.span(BufId::Recv, sb)), {s == 0 ? after : got[key(j - s, c)]});
      if (rb.count > 0)
        got[key(j - s - 1, c)] = plan.add(recv_from(left, sh.span(BufId::Recv, rb)), {after});
    }
}

// Appends `sub`, a plan over the hosts (its rank h: host h's local rank `local`), with its spans
// moved by `map`; its steps that wait for nothing wait for `after`.
template <typename Map>
void append_across(Plan& plan, const Plan& sub, const HierParams& p, int local, Map map,
                   std::uint32_t after) {
  const std::size_t base = plan.steps.size();
  for (const Step& s : sub.steps) {
    Step t = s;
    if (t.peer >= 0)
      t.peer = p.hosts[static_cast<std::size_t>(t.peer)][static_cast<std::size_t>(local)];
    t.dst = map(s.dst);
    t.src = map(s.src);
    t.src2 = map(s.src2);
    t.dep_begin = static_cast<std::uint32_t>(plan.deps.size());
    for (std::uint32_t d = 0; d < s.dep_count; ++d)
      plan.deps.push_back(static_cast<std::uint32_t>(base) + sub.deps[s.dep_begin + d]);
    if (s.dep_count == 0 && after != kNoStep) {
      plan.deps.push_back(after);
      t.dep_count = 1;
    }
    plan.steps.push_back(t);
  }
}

// The across phase's plan of the shard at element `first`, in place on Recv: Send and Recv to
// Recv from the shard, scratch after `scratch`.
auto shard_map(const HierParams& p, std::size_t first, std::size_t scratch) {
  const std::size_t offset = first * p.elem_size;
  return [=](Span s) {
    if (s.buf == BufId::Scratch) return Span{BufId::Scratch, s.offset + scratch, s.bytes};
    return Span{BufId::Recv, s.offset + offset, s.bytes};
  };
}

}  // namespace

std::string hierarchical_unfit(const std::vector<std::vector<int>>& hosts) {
  if (hosts.size() < 2) return "one host";
  for (const auto& h : hosts)
    if (h.size() != hosts.front().size()) return "hosts hold different numbers of ranks";
  return "";
}

Plan hierarchical_allreduce(const HierParams& p) {
  const Place at = place_of(p);
  const auto& local_ranks = p.hosts[static_cast<std::size_t>(at.host)];
  Shards sh;
  sh.count = p.count;
  sh.es = p.elem_size;
  sh.nlocal = at.nlocal;
  sh.chunk_elems = std::max<std::size_t>(1, p.chunk_bytes / p.elem_size);
  const std::size_t largest = sh.shard(0).count;
  sh.nchunks = std::max<std::size_t>(1, (largest + sh.chunk_elems - 1) / sh.chunk_elems);
  const std::size_t depth = std::max<std::size_t>(1, p.depth);

  Plan plan;
  plan.algorithm = "hier";
  const std::size_t bytes = p.count * p.elem_size;
  if (at.nlocal == 1) {
    if (!p.in_place && bytes > 0)
      plan.add(copy_into({BufId::Recv, 0, bytes}, {BufId::Send, 0, bytes}));
  } else {
    local_reduce_scatter(plan, sh, at, local_ranks, depth, 0);
  }
  const std::size_t local_scratch = at.nlocal > 1 ? 2 * depth * sh.chunk_elems * sh.es : 0;
  const std::uint32_t reduced = plan.steps.empty() ? kNoStep : join(plan, 0);

  RingParams across;
  across.rank = at.host;
  across.nranks = at.nhosts;
  across.count = sh.shard(at.local).count;
  across.elem_size = p.elem_size;
  across.chunk_bytes = p.chunk_bytes;
  across.depth = p.depth;
  across.in_place = true;
  const Plan ring = ring_allreduce(across);
  const std::size_t from = plan.steps.size();
  append_across(plan, ring, p, at.local, shard_map(p, sh.shard(at.local).first, local_scratch),
                reduced);
  plan.scratch_bytes = local_scratch + ring.scratch_bytes;
  if (at.nlocal == 1) return plan;
  const std::uint32_t shared = plan.steps.size() > from ? join(plan, from) : reduced;
  local_allgather(plan, sh, at, local_ranks, shared);
  return plan;
}

namespace {

// The blocks of an allgather or reduce-scatter (`count` elements per rank) by column: column i
// holds the blocks of the local ranks i of every host, host by host, each cut into `nq` pieces
// of at most a chunk. Piece k of a column is piece k % nq of host k / nq's block.
struct Columns {
  const HierParams& p;
  std::size_t nq = 1;
  int nhosts = 1;
  int nlocal = 1;

  Columns(const HierParams& params, const Place& at)
      : p(params), nhosts(at.nhosts), nlocal(at.nlocal) {
    const std::size_t chunk_elems = std::max<std::size_t>(1, p.chunk_bytes / p.elem_size);
    nq = std::max<std::size_t>(1, (p.count + chunk_elems - 1) / chunk_elems);
  }
  [[nodiscard]] std::size_t pieces() const { return static_cast<std::size_t>(nhosts) * nq; }
  [[nodiscard]] std::size_t block() const { return p.count * p.elem_size; }
  // Piece k of column `col` in a buffer of every rank's block (Recv of an allgather, Send of a
  // reduce-scatter).
  [[nodiscard]] Span piece(BufId buf, long col, std::size_t k) const {
    const auto h = static_cast<std::size_t>(k / nq);
    const int rank = p.hosts[h][static_cast<std::size_t>(wrap(col, nlocal))];
    const Block b = split_block(p.count, nq, k % nq);
    return {buf, static_cast<std::size_t>(rank) * block() + b.first * p.elem_size,
            b.count * p.elem_size};
  }
  // Piece k in a buffer of one column, host by host (the reduce-scatter's folded column).
  [[nodiscard]] Span column_piece(std::size_t offset, std::size_t k) const {
    const Block b = split_block(p.count, nq, k % nq);
    return {BufId::Scratch, offset + ((k / nq) * p.count + b.first) * p.elem_size,
            b.count * p.elem_size};
  }
};

// A sub-plan over the hosts whose blocks (host h: block h) are the blocks of the ranks of
// column `col` in `buf`, a buffer of every rank's block; other spans as `other` maps them.
template <typename Other>
auto column_map(const HierParams& p, int col, BufId buf, Other other) {
  const std::size_t block = p.count * p.elem_size;
  return [=, &p](Span s) {
    if (s.buf != buf || s.bytes == 0) return other(s);
    const std::size_t h = s.offset / block;
    const int rank = p.hosts[h][static_cast<std::size_t>(col)];
    return Span{buf, static_cast<std::size_t>(rank) * block + s.offset % block, s.bytes};
  };
}

RingParams across_params(const HierParams& p, const Place& at) {
  RingParams r;
  r.rank = at.host;
  r.nranks = at.nhosts;
  r.count = p.count;
  r.elem_size = p.elem_size;
  r.chunk_bytes = p.chunk_bytes;
  r.depth = p.depth;
  r.in_place = p.in_place;
  return r;
}

}  // namespace

Plan hierarchical_allgather(const HierParams& p) {
  const Place at = place_of(p);
  Plan plan;
  plan.algorithm = "hier";
  const Columns cols(p, at);
  if (cols.block() == 0) return plan;
  // Across: this rank's block with its counterparts', a ring over the hosts.
  const Plan ring = ring_allgather(across_params(p, at));
  append_across(plan, ring, p, at.local,
                column_map(p, at.local, BufId::Recv, [](Span s) { return s; }), kNoStep);
  plan.scratch_bytes = ring.scratch_bytes;
  if (at.nlocal == 1) return plan;
  // Inside the host: a ring of the local ranks passes the columns on, piece by piece.
  const std::uint32_t across = join(plan, 0);
  const auto& local = p.hosts[static_cast<std::size_t>(at.host)];
  const int j = at.local;
  const int right = local[static_cast<std::size_t>(wrap(j + 1, at.nlocal))];
  const int left = local[static_cast<std::size_t>(wrap(j - 1, at.nlocal))];
  std::vector<std::uint32_t> got(static_cast<std::size_t>(at.nlocal) * cols.pieces(), kNoStep);
  auto key = [&](long col, std::size_t k) {
    return static_cast<std::size_t>(wrap(col, at.nlocal)) * cols.pieces() + k;
  };
  for (std::size_t k = 0; k < cols.pieces(); ++k)
    for (int s = 0; s + 1 < at.nlocal; ++s) {
      plan.add(send_to(right, cols.piece(BufId::Recv, j - s, k)),
               {s == 0 ? across : got[key(j - s, k)]});
      got[key(j - s - 1, k)] = plan.add(recv_from(left, cols.piece(BufId::Recv, j - s - 1, k)));
    }
  return plan;
}

Plan hierarchical_reduce_scatter(const HierParams& p) {
  const Place at = place_of(p);
  Plan plan;
  plan.algorithm = "hier";
  const Columns cols(p, at);
  if (cols.block() == 0) return plan;
  const std::size_t column_bytes = static_cast<std::size_t>(at.nhosts) * cols.block();
  const Plan ring = ring_reduce_scatter(across_params(p, at));
  if (at.nlocal == 1) {  // across only, straight from the input
    append_across(plan, ring, p, 0, column_map(p, 0, BufId::Send, [](Span s) { return s; }),
                  kNoStep);
    plan.scratch_bytes = ring.scratch_bytes;
    return plan;
  }
  // Inside the host: a ring reduce-scatter of the columns, as ring_reduce_scatter's, so local
  // rank j folds column j (every host's block of its local ranks j) into scratch [0, column).
  const auto& local = p.hosts[static_cast<std::size_t>(at.host)];
  const int j = at.local;
  const int right = local[static_cast<std::size_t>(wrap(j + 1, at.nlocal))];
  const int left = local[static_cast<std::size_t>(wrap(j - 1, at.nlocal))];
  const std::size_t depth = std::max<std::size_t>(1, p.depth);
  const std::size_t slot_bytes = split_block(p.count, cols.nq, 0).count * p.elem_size;
  SlotPool pool(slot_bytes, 2 * depth, column_bytes);
  std::vector<std::uint32_t> producer(depth, kNoStep);
  for (std::size_t g = 0; g < cols.pieces(); g += depth) {
    const std::size_t gend = std::min(cols.pieces(), g + depth);
    for (int s = 0; s + 1 < at.nlocal; ++s) {
      const bool last = s + 2 == at.nlocal;
      for (std::size_t k = g; k < gend; ++k) {
        const std::size_t i = k - g;
        const Span sb = cols.piece(BufId::Send, j - s - 1, k);
        const Span rb = cols.piece(BufId::Send, j - s - 2, k);
        auto held = pool.take(2 * i + static_cast<std::size_t>((s + 1) % 2));
        const Span src = s == 0 ? sb : Span{BufId::Scratch, held.span.offset, sb.bytes};
        const auto send = plan.add(send_to(right, src), {s == 0 ? kNoStep : producer[i]});
        if (s > 0) pool.release(held.index, send);
        auto slot = pool.take(2 * i + static_cast<std::size_t>(s % 2));
        const Span tmp{BufId::Scratch, slot.span.offset, rb.bytes};
        const auto recv = plan.add(recv_from(left, tmp), {slot.free_after});
        const Span dst = last ? cols.column_piece(0, k) : tmp;
        producer[i] = plan.add(reduce_into(dst, rb, tmp), {recv});
        if (last) pool.release(slot.index, producer[i]);
      }
    }
  }
  // Across: the folded column with its counterparts', a ring reduce-scatter over the hosts.
  const std::uint32_t folded = join(plan, 0);
  const std::size_t ring_scratch = column_bytes + pool.bytes();
  append_across(
      plan, ring, p, j,
      [&](Span s) {
        if (s.buf == BufId::Send) return Span{BufId::Scratch, s.offset, s.bytes};
        if (s.buf == BufId::Scratch) return Span{BufId::Scratch, s.offset + ring_scratch, s.bytes};
        return s;
      },
      folded);
  plan.scratch_bytes = ring_scratch + ring.scratch_bytes;
  return plan;
}

}  // namespace loom::algo
