// Buffer placement, filling and verification per collective. See layout.hpp.
#include "benchmarks/loom_perf/layout.hpp"

#include <numeric>

namespace loom::perf {
namespace {

unsigned char* at(void* base, std::size_t elements, std::size_t elem_size) {
  return static_cast<unsigned char*>(base) + elements * elem_size;
}

// Writes the expected values of `count` elements, then inverts them.
template <typename Fill>
void poison_with(void* dst, std::size_t count, std::size_t elem_size, Fill fill) {
  fill(dst);
  invert_bytes(dst, count * elem_size);
}

// Block q of a receive buffer made of one block per source rank (allgather, gather, alltoall,
// alltoallv): where it starts (elements), its length, and which elements of rank q's input it
// must hold. alltoall: rank q's send block r holds q's input elements [r * count, (r + 1) *
// count); alltoallv: those at q's send displacement for r.
struct Block {
  std::size_t at;
  std::size_t count;
  std::size_t first;
};

Block recv_block(const Layout& l, int q) {
  const std::size_t n = l.count;
  const auto qs = static_cast<std::size_t>(q);
  switch (l.coll) {
    case Coll::AllToAll: return {qs * n, n, static_cast<std::size_t>(l.rank) * n};
    case Coll::AllToAllV:
      return {l.displs[qs], l.counts[qs], alltoallv_displ(q, l.rank, l.nranks, n)};
    default: return {qs * n, n, 0};  // allgather, gather
  }
}

int prev_rank(const Layout& l) {
  return (l.rank + l.nranks - 1) % l.nranks;
}

std::size_t total_elements(const Layout& l) {
  if (l.coll == Coll::AllToAllV)
    return std::accumulate(l.counts.begin(), l.counts.end(), std::size_t{0});
  return l.count * static_cast<std::size_t>(l.nranks);
}

// Fills every block of the receive buffer with its expected values, then inverts them all.
void poison_blocks(const Layout& l, const Pattern& p) {
  for (int q = 0; q < l.nranks; ++q) {
    const Block b = recv_block(l, q);
    p.fill_input(at(l.recv, b.at, p.elem_size()), b.count, q, b.first);
  }
  invert_bytes(l.recv, total_elements(l) * p.elem_size());
}

Pattern::Mismatch check_blocks(const Layout& l, const Pattern& p) {
  Pattern::Mismatch total;
  for (int q = 0; q < l.nranks; ++q) {
    const Block b = recv_block(l, q);
    const Pattern::Mismatch m = p.check_input(at(l.recv, b.at, p.elem_size()), b.count, q, b.first);
    if (total.wrong == 0 && m.wrong > 0) total.first = b.at + m.first;
    total.wrong += m.wrong;
  }
  return total;
}

// alltoall, alltoallv, gather, scatter.
void prepare_exchange(const Layout& l, const Pattern& p, bool poison) {
  const std::size_t elem = p.elem_size();
  const std::size_t n = l.count;
  const auto all = static_cast<std::size_t>(l.nranks) * n;
  switch (l.coll) {
    case Coll::AllToAll:
    case Coll::AllToAllV:
      if (poison && !l.in_place) poison_blocks(l, p);
      p.fill_input(l.send, total_elements(l), l.rank);  // block p at its displacement
      return;
    case Coll::Gather:
      // In place the root's own block is rewritten with the input below.
      if (poison && l.rank == l.root) poison_blocks(l, p);
      p.fill_input(l.send, n, l.rank);
      return;
    case Coll::Scatter: {
      // In place the root's block stays where it is: the root's send fill below writes it.
      const auto first = static_cast<std::size_t>(l.rank) * n;
      if (poison && (!l.in_place || l.rank != l.root))
        poison_with(l.recv, n, elem, [&](void* d) { p.fill_input(d, n, p.root(), first); });
      if (l.rank == l.root) p.fill_input(l.send, all, p.root());
      return;
    }
    default: return;
  }
}

}  // namespace

std::size_t alltoallv_displ(int rank, int peer, int nranks, std::size_t unit) {
  std::size_t units = 0;
  for (int q = 0; q < peer; ++q) units += alltoallv_weight(rank, q, nranks);
  return units * unit;
}

Layout make_layout(Coll coll, bool in_place, void* sendbuf, void* recvbuf, std::size_t count,
                   std::size_t elem_size, int rank, int nranks, int root) {
  Layout layout{coll, in_place, sendbuf, recvbuf, count, rank, nranks, root, {}, {}};
  if (coll == Coll::AllToAllV) {
    for (int p = 0; p < nranks; ++p) {
      layout.counts.push_back(count * alltoallv_weight(rank, p, nranks));
      layout.displs.push_back(alltoallv_displ(rank, p, nranks, count));
    }
  }
  if (!in_place) return layout;
  const auto offset = static_cast<std::size_t>(rank) * count;
  switch (coll) {
    case Coll::AllGather:
    case Coll::Gather: layout.send = at(recvbuf, offset, elem_size); break;
    case Coll::ReduceScatter:
    case Coll::Scatter: layout.recv = at(sendbuf, offset, elem_size); break;
    case Coll::SendRecv: break;  // no in-place form: the buffers stay apart
    default: layout.recv = sendbuf; break;
  }
  return layout;
}

void prepare_buffers(const Layout& l, const Pattern& p, bool poison) {
  const std::size_t elem = p.elem_size();
  const std::size_t n = l.count;
  const bool poison_recv = poison && !l.in_place;
  switch (l.coll) {
    case Coll::AllReduce:
    case Coll::Reduce:
      if (poison_recv && (l.coll == Coll::AllReduce || l.rank == p.root())) {
        poison_with(l.recv, n, elem, [&](void* d) { p.fill_reduced(d, n); });
      }
      p.fill_input(l.send, n, l.rank);
      return;
    case Coll::Broadcast:
      if (poison_recv) poison_with(l.recv, n, elem, [&](void* d) { p.fill_input(d, n, p.root()); });
      p.fill_input(l.send, n, l.rank);
      return;
    case Coll::AllGather:
      if (poison) poison_blocks(l, p);  // in place too: the own block is rewritten below
      p.fill_input(l.send, n, l.rank);
      return;
    case Coll::ReduceScatter: {
      const auto first = static_cast<std::size_t>(l.rank) * n;
      if (poison_recv) poison_with(l.recv, n, elem, [&](void* d) { p.fill_reduced(d, n, first); });
      p.fill_input(l.send, n * static_cast<std::size_t>(l.nranks), l.rank);
      return;
    }
    case Coll::SendRecv:  // sendrecv: this rank's input to the next, the previous rank's input back
      if (poison) poison_with(l.recv, n, elem, [&](void* d) { p.fill_input(d, n, prev_rank(l)); });
      p.fill_input(l.send, n, l.rank);
      return;
    default: prepare_exchange(l, p, poison); return;
  }
}

Pattern::Mismatch verify_result(const Layout& l, const Pattern& p) {
  const std::size_t n = l.count;
  const auto first = static_cast<std::size_t>(l.rank) * n;
  switch (l.coll) {
    case Coll::AllReduce: return p.check_reduced(l.recv, n);
    case Coll::Reduce: return l.rank == p.root() ? p.check_reduced(l.recv, n) : Pattern::Mismatch{};
    case Coll::Broadcast: return p.check_input(l.recv, n, p.root());
    case Coll::ReduceScatter: return p.check_reduced(l.recv, n, first);
    case Coll::Scatter: return p.check_input(l.recv, n, p.root(), first);
    case Coll::Gather: return l.rank == p.root() ? check_blocks(l, p) : Pattern::Mismatch{};
    case Coll::SendRecv: return p.check_input(l.recv, n, prev_rank(l));
    case Coll::AllGather:
    case Coll::AllToAll:
    case Coll::AllToAllV: return check_blocks(l, p);
  }
  return {};
}

Region result_region(const Layout& l) {
  const bool at_root = l.rank == l.root;
  switch (l.coll) {
    case Coll::AllReduce:
    case Coll::Broadcast:
    case Coll::ReduceScatter:
    case Coll::Scatter:
    case Coll::SendRecv: return {l.recv, l.count};
    case Coll::Reduce: return at_root ? Region{l.recv, l.count} : Region{};
    case Coll::Gather: return at_root ? Region{l.recv, total_elements(l)} : Region{};
    case Coll::AllGather:
    case Coll::AllToAll:
    case Coll::AllToAllV: return {l.recv, total_elements(l)};
  }
  return {};
}

Work issue(Communicator& comm, const Layout& l, DataType dtype, RedOp op, int root,
           const CollOptions& o) {
  switch (l.coll) {
    case Coll::AllReduce: return comm.allreduce(l.send, l.recv, l.count, dtype, op, o);
    case Coll::AllGather: return comm.allgather(l.send, l.recv, l.count, dtype, o);
    case Coll::Broadcast: return comm.broadcast(l.send, l.recv, l.count, dtype, root, o);
    case Coll::Reduce: return comm.reduce(l.send, l.recv, l.count, dtype, op, root, o);
    case Coll::ReduceScatter: return comm.reduce_scatter(l.send, l.recv, l.count, dtype, op, o);
    case Coll::AllToAll: return comm.alltoall(l.send, l.recv, l.count, dtype, o);
    case Coll::AllToAllV:
      return comm.alltoallv(l.send, l.counts, l.displs, l.recv, l.counts, l.displs, dtype, o);
    case Coll::Gather: return comm.gather(l.send, l.recv, l.count, dtype, root, o);
    case Coll::Scatter: return comm.scatter(l.send, l.recv, l.count, dtype, root, o);
    case Coll::SendRecv:
      return comm.sendrecv(l.send, l.count, (l.rank + 1) % l.nranks, l.recv, l.count, prev_rank(l),
                           dtype, 0, o);
  }
  return {};
}

}  // namespace loom::perf
