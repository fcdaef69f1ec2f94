#include "selector/shape.hpp"

namespace loom::select {

std::string_view to_string(Coll c) {
  switch (c) {
    case Coll::AllReduce: return "allreduce";
    case Coll::AllGather: return "allgather";
    case Coll::ReduceScatter: return "reduce_scatter";
    case Coll::Broadcast: return "broadcast";
    case Coll::Reduce: return "reduce";
  }
  return "?";
}

std::string_view to_string(Algo a) {
  switch (a) {
    case Algo::Ring: return "ring";
    case Algo::Tree: return "tree";
    case Algo::Deterministic: return "deterministic";
    case Algo::Rd: return "rd";
  }
  return "?";
}

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
