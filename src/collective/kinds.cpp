#include "collective/kinds.hpp"

namespace loom::coll {

std::string_view to_string(CollKind k) {
  switch (k) {
    case CollKind::AllReduce: return "allreduce";
    case CollKind::AllGather: return "allgather";
    case CollKind::ReduceScatter: return "reduce_scatter";
    case CollKind::Broadcast: return "broadcast";
    case CollKind::Reduce: return "reduce";
    case CollKind::Barrier: return "barrier";
    case CollKind::AllToAll: return "alltoall";
    case CollKind::AllToAllV: return "alltoallv";
    case CollKind::Gather: return "gather";
    case CollKind::Scatter: return "scatter";
    case CollKind::P2P: return "send/recv";
  }
  return "unknown-collective";
}

std::string_view to_string(Algo a) {
  switch (a) {
    case Algo::Ring: return "ring";
    case Algo::Tree: return "tree";
    case Algo::Deterministic: return "deterministic";
    case Algo::Rd: return "rd";
    case Algo::Hier: return "hier";
    case Algo::Bruck: return "bruck";
  }
  return "?";
}

std::optional<Algo> forced_by(Algorithm hint) {
  switch (hint) {
    case Algorithm::Ring: return Algo::Ring;
    case Algorithm::Tree: return Algo::Tree;
    case Algorithm::RecursiveDoubling: return Algo::Rd;
    case Algorithm::Hierarchical: return Algo::Hier;
    case Algorithm::Bruck: return Algo::Bruck;
    case Algorithm::Auto: break;
  }
  return std::nullopt;
}

std::optional<Algorithm> hint_for(Algo a) {
  for (Algorithm h : {Algorithm::Ring, Algorithm::Tree, Algorithm::RecursiveDoubling,
                      Algorithm::Hierarchical, Algorithm::Bruck})
    if (forced_by(h) == a) return h;
  return std::nullopt;
}

std::string_view to_string(MemoryKind k) noexcept {
  return k == MemoryKind::Device ? "device" : "host";
}

}  // namespace loom::coll
