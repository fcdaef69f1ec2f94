#include "selector/shape.hpp"

namespace loom::select {

bool supports(Coll c, Algo a) {
  if (a == Algo::Ring) return true;
  if (a == Algo::Tree) return c == Coll::AllReduce || c == Coll::Broadcast || c == Coll::Reduce;
  if (a == Algo::Rd) return c == Coll::AllReduce;
  return c == Coll::AllReduce || c == Coll::Reduce || c == Coll::ReduceScatter;
}

int flat_tree_depth(int nranks) {
  int levels = 1;  // the in-order tree over 1..n has floor(log2 n) + 1 levels
  while ((1 << levels) <= nranks) ++levels;
  return levels - 1;
}

}  // namespace loom::select
