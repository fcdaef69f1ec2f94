#include "selector/shape.hpp"

#include "selector/catalog.hpp"

namespace loom::select {

bool supports(Coll c, Algo a) {
  return row(a).serves(c);
}

int flat_tree_depth(int nranks) {
  int levels = 1;  // the in-order tree over 1..n has floor(log2 n) + 1 levels
  while ((1 << levels) <= nranks) ++levels;
  return levels - 1;
}

}  // namespace loom::select
