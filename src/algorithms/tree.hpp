// Double binary tree schedules (pure functions).
//
// Two complementary binary trees span the same ranks: in the first, the odd ranks are the
// interior nodes; in the second (mirrored for even n, shifted by one for odd n) the even ranks
// are, so every rank is interior in at most one tree and the two trees together keep every
// link's load balanced. Each tree carries half of the data. Allreduce reduces each chunk up its
// tree and broadcasts it back down, the up phase running `depth` chunks ahead of the down phase
// so both overlap. Broadcast and reduce use the same two trees re-rooted at the collective's
// root. The per-host variant links the ranks of each host in a chain below a host leader and
// builds the two trees over the leaders only.
#pragma once

#include <cstddef>
#include <vector>

#include "algorithms/plan.hpp"

namespace loom::algo {

/// A rooted tree over ranks 0..n-1: parent[r] (-1 for the root) and children[r].
struct Tree {
  int root = 0;
  std::vector<int> parent;
  std::vector<std::vector<int>> children;

  [[nodiscard]] int size() const { return static_cast<int>(parent.size()); }
  /// Levels from the root (1 for a single node).
  [[nodiscard]] int depth() const;
  [[nodiscard]] bool interior(int r) const {
    return !children[static_cast<std::size_t>(r)].empty();
  }
  /// The same tree with `new_root` as root (the path to the old root reversed).
  [[nodiscard]] Tree rerooted(int new_root) const;
};

struct DoubleTree {
  Tree trees[2];
};

/// Binary tree over positions 1..n (in-order: a node whose lowest set bit is b has children
/// p - b/2 and the first of p + b/2, p + b/4, ... that is <= n), with rank_at[p-1] at position p.
Tree inorder_binary_tree(const std::vector<int>& rank_at);
/// The two complementary trees over ranks 0..n-1.
DoubleTree double_binary_tree(int n);
/// Per host: a chain from the host's leader through its other ranks; trees over the leaders.
/// `hosts[h]` lists the ranks of host h (in chain order). The first tree's leader of each host is
/// its first rank, the second tree's its last rank (chain reversed), so the chains alternate.
DoubleTree host_double_tree(const std::vector<std::vector<int>>& hosts);

struct TreeParams {
  int rank = 0;
  int nranks = 1;
  std::vector<std::vector<int>> hosts;  // ranks per host; empty or one host: flat trees
  std::size_t count = 0;                // elements
  std::size_t elem_size = 1;
  std::size_t chunk_bytes = std::size_t{512} * 1024;
  std::size_t depth = 4;
  bool in_place = false;
  int root = 0;  // broadcast and reduce
};

/// The trees TreeParams asks for (flat or per host).
DoubleTree make_trees(const TreeParams& p);
Plan tree_allreduce(const TreeParams& p);
Plan tree_broadcast(const TreeParams& p);
Plan tree_reduce(const TreeParams& p);

}  // namespace loom::algo
