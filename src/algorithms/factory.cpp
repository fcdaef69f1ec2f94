#include "algorithms/factory.hpp"

#include <optional>
#include <utility>

#include "algorithms/bruck.hpp"
#include "algorithms/deterministic.hpp"
#include "algorithms/exchange.hpp"
#include "algorithms/hierarchical.hpp"
#include "algorithms/recursive_doubling.hpp"
#include "algorithms/ring.hpp"
#include "algorithms/tree.hpp"

namespace loom::algo {
namespace {

std::vector<std::size_t> bytes_of(const std::vector<std::size_t>& elems, std::size_t esize) {
  std::vector<std::size_t> b(elems.size());
  for (std::size_t i = 0; i < elems.size(); ++i) b[i] = elems[i] * esize;
  return b;
}

// The calls that only move data have one plan each.
std::optional<Plan> exchange(const PlanRequest& r) {
  const coll::OpDesc& op = r.op;
  const std::size_t esize = dtype_size(op.dtype);
  const std::size_t block = op.count * esize;
  const bool in_place = r.in_place;
  switch (op.kind) {
    case coll::CollKind::Barrier: return dissemination_barrier(r.rank, r.nranks);
    case coll::CollKind::AllToAll:
      return pairwise_alltoall(uniform_layout(r.rank, r.nranks, block, in_place));
    case coll::CollKind::AllToAllV: {
      ExchangeLayout l;
      l.rank = r.rank;
      l.nranks = r.nranks;
      l.in_place = in_place;
      l.send_bytes = bytes_of(op.v->send_counts, esize);
      l.send_offsets = bytes_of(op.v->send_displs, esize);
      l.recv_bytes = bytes_of(op.v->recv_counts, esize);
      l.recv_offsets = bytes_of(op.v->recv_displs, esize);
      return pairwise_alltoall(l);
    }
    case coll::CollKind::Gather: return flat_gather(r.rank, r.nranks, op.root, block, in_place);
    case coll::CollKind::Scatter: return flat_scatter(r.rank, r.nranks, op.root, block, in_place);
    case coll::CollKind::P2P: {  // the send and the receive run side by side
      Plan plan;
      plan.algorithm = "p2p";
      if (op.p2p.to >= 0) plan.add(send_to(op.p2p.to, {BufId::Send, 0, block}));
      if (op.p2p.from >= 0)
        plan.add(recv_from(op.p2p.from, {BufId::Recv, 0, op.p2p.recv_count * esize}));
      return plan;
    }
    default: return std::nullopt;
  }
}

RingParams ring_params(const PlanRequest& r) {
  RingParams p;
  p.rank = r.rank;
  p.nranks = r.nranks;
  p.order = r.ring_order;
  p.count = r.op.count;
  p.elem_size = dtype_size(r.op.dtype);
  p.chunk_bytes = r.chunk_bytes;
  p.depth = r.depth;
  p.min_step_part_bytes = r.min_step_part_bytes;
  p.in_place = r.in_place;
  p.root = r.op.root;
  return p;
}

std::optional<Plan> tree(const PlanRequest& r) {
  TreeParams t;
  t.rank = r.rank;
  t.nranks = r.nranks;
  if (r.hosts.size() > 1 && static_cast<int>(r.hosts.size()) < r.nranks) t.hosts = r.hosts;
  t.count = r.op.count;
  t.elem_size = dtype_size(r.op.dtype);
  t.chunk_bytes = r.chunk_bytes;
  t.depth = r.depth;
  t.in_place = r.in_place;
  t.root = r.op.root;
  switch (r.op.kind) {
    case coll::CollKind::AllReduce: return tree_allreduce(t);
    case coll::CollKind::Broadcast: return tree_broadcast(t);
    case coll::CollKind::Reduce: return tree_reduce(t);
    default: return std::nullopt;
  }
}

}  // namespace

Plan make_plan(const PlanRequest& r) {
  if (std::optional<Plan> plan = exchange(r)) return *std::move(plan);
  const RingParams p = ring_params(r);
  // On a CPU other ranks share, a ring's sender goes on to its next step instead of waiting
  // for its neighbour to read the message in place (docs/algorithms.md); deterministic plans
  // too: their ranks send to the slices' owners and then around the ring.
  auto buffered = [&r](Plan plan) {
    plan.buffered_sends = r.buffered_ring_sends;
    return plan;
  };
  const coll::CollKind k = r.op.kind;
  if (r.algo == coll::Algo::Deterministic && r.op.has_redop()) {
    if (k == coll::CollKind::AllReduce) return buffered(deterministic_allreduce(p));
    if (k == coll::CollKind::ReduceScatter) return buffered(deterministic_reduce_scatter(p));
    return buffered(deterministic_reduce(p));
  }
  if (r.algo == coll::Algo::Rd && k == coll::CollKind::AllReduce) return rd_allreduce(p);
  if (r.algo == coll::Algo::Hier && hierarchical_unfit(r.hosts).empty()) {
    const HierParams h{r.rank,        r.hosts, r.op.count, p.elem_size,
                       r.chunk_bytes, r.depth, r.in_place};
    if (k == coll::CollKind::AllReduce) return buffered(hierarchical_allreduce(h));
    if (k == coll::CollKind::AllGather) return buffered(hierarchical_allgather(h));
    if (k == coll::CollKind::ReduceScatter) return buffered(hierarchical_reduce_scatter(h));
  }
  if (r.algo == coll::Algo::Bruck && k == coll::CollKind::AllGather) return bruck_allgather(p);
  if (r.algo == coll::Algo::Bruck && k == coll::CollKind::ReduceScatter)
    return bruck_reduce_scatter(p);
  if (r.algo == coll::Algo::Tree)
    if (std::optional<Plan> plan = tree(r)) return *std::move(plan);
  switch (k) {
    case coll::CollKind::AllReduce: return buffered(ring_allreduce(p));
    case coll::CollKind::AllGather: return buffered(ring_allgather(p));
    case coll::CollKind::ReduceScatter: return buffered(ring_reduce_scatter(p));
    case coll::CollKind::Broadcast: return chain_broadcast(p);
    case coll::CollKind::Reduce: return chain_reduce(p);
    default: return {};
  }
}

}  // namespace loom::algo
