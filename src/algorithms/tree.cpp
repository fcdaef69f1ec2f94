#include "algorithms/tree.hpp"

#include <algorithm>

namespace loom::algo {

int Tree::depth() const {
  int best = 0;
  for (int r = 0; r < size(); ++r) {
    int d = 1;
    for (int x = r; parent[static_cast<std::size_t>(x)] >= 0;
         x = parent[static_cast<std::size_t>(x)])
      ++d;
    best = std::max(best, d);
  }
  return best;
}

Tree Tree::rerooted(int new_root) const {
  Tree t = *this;
  int child = new_root;
  int up = parent[static_cast<std::size_t>(new_root)];
  t.parent[static_cast<std::size_t>(new_root)] = -1;
  while (up >= 0) {  // reverse the edge child -> up
    const int next = parent[static_cast<std::size_t>(up)];
    auto& kids = t.children[static_cast<std::size_t>(up)];
    kids.erase(std::find(kids.begin(), kids.end(), child));
    t.children[static_cast<std::size_t>(child)].push_back(up);
    t.parent[static_cast<std::size_t>(up)] = child;
    child = up;
    up = next;
  }
  t.root = new_root;
  return t;
}

Tree inorder_binary_tree(const std::vector<int>& rank_at) {
  const int n = static_cast<int>(rank_at.size());
  Tree t;
  t.parent.assign(rank_at.size(), -1);
  t.children.assign(rank_at.size(), {});
  if (n == 0) return t;
  auto link = [&](int parent_pos, int child_pos) {
    int pr = rank_at[static_cast<std::size_t>(parent_pos - 1)];
    int cr = rank_at[static_cast<std::size_t>(child_pos - 1)];
    t.parent[static_cast<std::size_t>(cr)] = pr;
    t.children[static_cast<std::size_t>(pr)].push_back(cr);
  };
  int top = 1;
  while (top * 2 <= n) top *= 2;
  t.root = rank_at[static_cast<std::size_t>(top - 1)];
  for (int p = 2; p <= n; p += 2) {  // odd positions are leaves
    const int b = p & -p;
    link(p, p - b / 2);
    int h = b / 2;
    while (h >= 1 && p + h > n) h /= 2;
    if (h >= 1) link(p, p + h);
  }
  return t;
}

DoubleTree double_binary_tree(int n) {
  std::vector<int> first(static_cast<std::size_t>(n)), second(static_cast<std::size_t>(n));
  for (int p = 1; p <= n; ++p) {
    first[static_cast<std::size_t>(p - 1)] = p - 1;  // interior: odd ranks
    // Even n: mirrored; odd n: shifted by one (rank 0 last). Interior: even ranks.
    second[static_cast<std::size_t>(p - 1)] = n % 2 == 0 ? n - p : p % n;
  }
  return {{inorder_binary_tree(first), inorder_binary_tree(second)}};
}

DoubleTree host_double_tree(const std::vector<std::vector<int>>& hosts) {
  int n = 0;
  for (const auto& h : hosts) n += static_cast<int>(h.size());
  const int nhosts = static_cast<int>(hosts.size());
  DoubleTree across = double_binary_tree(nhosts);
  DoubleTree out;
  for (int t = 0; t < 2; ++t) {
    Tree& tree = out.trees[t];
    tree.parent.assign(static_cast<std::size_t>(n), -1);
    tree.children.assign(static_cast<std::size_t>(n), {});
    auto leader = [&](int h) {
      const auto& rs = hosts[static_cast<std::size_t>(h)];
      return t == 0 ? rs.front() : rs.back();
    };
    auto link = [&](int parent, int child) {
      tree.parent[static_cast<std::size_t>(child)] = parent;
      tree.children[static_cast<std::size_t>(parent)].push_back(child);
    };
    const Tree& ht = across.trees[t];
    tree.root = leader(ht.root);
    for (int h = 0; h < nhosts; ++h)
      for (int c : ht.children[static_cast<std::size_t>(h)]) link(leader(h), leader(c));
    for (const auto& rs : hosts)
      for (std::size_t i = 1; i < rs.size(); ++i) {
        if (t == 0)
          link(rs[i - 1], rs[i]);
        else
          link(rs[rs.size() - i], rs[rs.size() - i - 1]);
      }
  }
  return out;
}

DoubleTree make_trees(const TreeParams& p) {
  if (p.hosts.size() <= 1 || static_cast<int>(p.hosts.size()) == p.nranks)
    return double_binary_tree(p.nranks);
  return host_double_tree(p.hosts);
}

namespace {

// Geometry shared by the tree plans: tree t carries elements half(t), cut into nchunks chunks.
struct Halves {
  std::size_t count;
  std::size_t es;
  std::size_t chunk_elems;
  std::size_t nchunks;

  explicit Halves(const TreeParams& p)
      : count(p.count),
        es(p.elem_size),
        chunk_elems(std::max<std::size_t>(1, p.chunk_bytes / p.elem_size)),
        nchunks((split_block(p.count, 2, 0).count + chunk_elems - 1) / chunk_elems) {}
  [[nodiscard]] Block chunk(int t, std::size_t c) const {
    Block h = split_block(count, 2, static_cast<std::size_t>(t));
    Block b = split_block(h.count, nchunks, c);
    return {h.first + b.first, b.count};
  }
  [[nodiscard]] Span span(BufId buf, Block b) const { return {buf, b.first * es, b.count * es}; }
  [[nodiscard]] std::size_t slot_bytes() const { return chunk_elems * es; }
};

std::size_t max_children(const DoubleTree& dt, int rank) {
  std::size_t k = 0;
  for (const Tree& t : dt.trees) k = std::max(k, t.children[static_cast<std::size_t>(rank)].size());
  return k;
}

Plan local_copy(const TreeParams& p) {
  Plan plan;
  plan.algorithm = "local";
  const std::size_t bytes = p.count * p.elem_size;
  if (!p.in_place && bytes > 0)
    plan.add(copy_into({BufId::Recv, 0, bytes}, {BufId::Send, 0, bytes}));
  return plan;
}

// Reduces chunk `b` up `tree`: receives each child's partial sum, folds it into this rank's
// contribution and sends the result to the parent (the root folds into Recv). Returns the last
// step that reads this rank's buffers for the chunk.
std::uint32_t reduce_up(Plan& plan, SlotPool& pool, const Halves& h, const Tree& tree, int rank,
                        Block b) {
  const auto& kids = tree.children[static_cast<std::size_t>(rank)];
  const int parent = tree.parent[static_cast<std::size_t>(rank)];
  const Span mine = h.span(BufId::Send, b);
  if (kids.empty()) return plan.add(send_to(parent, mine));
  const bool is_root = parent < 0;
  std::vector<SlotPool::Slot> got;
  std::vector<std::uint32_t> recvs;
  for (int k : kids) {
    got.push_back(pool.acquire());
    Span tmp{BufId::Scratch, got.back().span.offset, mine.bytes};
    recvs.push_back(plan.add(recv_from(k, tmp), {got.back().free_after}));
  }
  auto acc = is_root ? SlotPool::Slot{0, h.span(BufId::Recv, b), kNoStep} : pool.acquire();
  Span acc_span{acc.span.buf, acc.span.offset, mine.bytes};
  Span a = mine;
  std::uint32_t last = acc.free_after;
  for (std::size_t i = 0; i < kids.size(); ++i) {
    Span tmp{BufId::Scratch, got[i].span.offset, mine.bytes};
    last = plan.add(reduce_into(acc_span, a, tmp), {recvs[i], last});
    pool.release(got[i].index, last);
    a = acc_span;
  }
  if (is_root) return last;
  auto sent = plan.add(send_to(parent, acc_span), {last});
  pool.release(acc.index, sent);
  return sent;
}

// Receives chunk `b` from the parent into Recv (after `after`) and forwards it to the children;
// the root forwards `from` as soon as `after` is done.
void broadcast_down(Plan& plan, const Halves& h, const Tree& tree, int rank, Block b, Span from,
                    std::uint32_t after) {
  const int parent = tree.parent[static_cast<std::size_t>(rank)];
  Span out = from;
  if (parent >= 0) {
    out = h.span(BufId::Recv, b);
    after = plan.add(recv_from(parent, out), {after});
  }
  for (int k : tree.children[static_cast<std::size_t>(rank)]) plan.add(send_to(k, out), {after});
}

}  // namespace

Plan tree_allreduce(const TreeParams& p) {
  if (p.nranks == 1) return local_copy(p);
  const DoubleTree dt = make_trees(p);
  const Halves h(p);
  Plan plan;
  plan.algorithm = p.hosts.size() > 1 ? "tree/host" : "tree";
  SlotPool pool(h.slot_bytes(), std::max<std::size_t>(1, p.depth) * (max_children(dt, p.rank) + 1));
  plan.scratch_bytes = pool.bytes();
  const std::size_t lag = std::max<std::size_t>(1, p.depth);
  std::vector<std::uint32_t> up_done[2] = {std::vector<std::uint32_t>(h.nchunks, kNoStep),
                                           std::vector<std::uint32_t>(h.nchunks, kNoStep)};
  // Message groups in one global order on every rank: up(i) for both trees, then down(i - lag).
  for (std::size_t i = 0; i < h.nchunks + lag; ++i) {
    for (int t = 0; t < 2 && i < h.nchunks; ++t) {
      Block b = h.chunk(t, i);
      if (b.count > 0) up_done[t][i] = reduce_up(plan, pool, h, dt.trees[t], p.rank, b);
    }
    for (int t = 0; t < 2 && i >= lag; ++t) {
      const std::size_t c = i - lag;
      Block b = h.chunk(t, c);
      if (b.count > 0)
        broadcast_down(plan, h, dt.trees[t], p.rank, b, h.span(BufId::Recv, b), up_done[t][c]);
    }
  }
  return plan;
}

Plan tree_broadcast(const TreeParams& p) {
  Plan plan;
  plan.algorithm = p.hosts.size() > 1 ? "tree/host" : "tree";
  const std::size_t bytes = p.count * p.elem_size;
  if (p.rank == p.root && !p.in_place && bytes > 0)
    plan.add(copy_into({BufId::Recv, 0, bytes}, {BufId::Send, 0, bytes}));
  if (p.nranks == 1) return plan;
  const DoubleTree dt = make_trees(p);
  const Tree trees[2] = {dt.trees[0].rerooted(p.root), dt.trees[1].rerooted(p.root)};
  const Halves h(p);
  for (std::size_t c = 0; c < h.nchunks; ++c)
    for (int t = 0; t < 2; ++t) {
      Block b = h.chunk(t, c);
      if (b.count > 0)
        broadcast_down(plan, h, trees[t], p.rank, b, h.span(BufId::Send, b), kNoStep);
    }
  return plan;
}

Plan tree_reduce(const TreeParams& p) {
  if (p.nranks == 1) return local_copy(p);
  const DoubleTree dt = make_trees(p);
  const Tree trees[2] = {dt.trees[0].rerooted(p.root), dt.trees[1].rerooted(p.root)};
  const Halves h(p);
  Plan plan;
  plan.algorithm = p.hosts.size() > 1 ? "tree/host" : "tree";
  std::size_t k = std::max(trees[0].children[static_cast<std::size_t>(p.rank)].size(),
                           trees[1].children[static_cast<std::size_t>(p.rank)].size());
  SlotPool pool(h.slot_bytes(), std::max<std::size_t>(1, p.depth) * (k + 1));
  plan.scratch_bytes = pool.bytes();
  for (std::size_t c = 0; c < h.nchunks; ++c)
    for (int t = 0; t < 2; ++t) {
      Block b = h.chunk(t, c);
      if (b.count > 0) (void)reduce_up(plan, pool, h, trees[t], p.rank, b);
    }
  return plan;
}

}  // namespace loom::algo
