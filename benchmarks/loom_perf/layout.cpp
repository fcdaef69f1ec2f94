// Buffer placement, filling and verification per collective. See layout.hpp.
#include "benchmarks/loom_perf/layout.hpp"

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

}  // namespace

Layout make_layout(Coll coll, bool in_place, void* sendbuf, void* recvbuf, std::size_t count,
                   std::size_t elem_size, int rank, int nranks) {
  Layout layout{coll, in_place, sendbuf, recvbuf, count, rank, nranks};
  if (!in_place) return layout;
  const auto offset = static_cast<std::size_t>(rank) * count;
  switch (coll) {
    case Coll::AllGather: layout.send = at(recvbuf, offset, elem_size); break;
    case Coll::ReduceScatter: layout.recv = at(sendbuf, offset, elem_size); break;
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
      if (poison) {  // in place too: the own block is rewritten with the input below
        for (int r = 0; r < l.nranks; ++r) p.fill_input(at(l.recv, r * n, elem), n, r);
        invert_bytes(l.recv, n * static_cast<std::size_t>(l.nranks) * elem);
      }
      p.fill_input(l.send, n, l.rank);
      return;
    case Coll::ReduceScatter: {
      const auto first = static_cast<std::size_t>(l.rank) * n;
      if (poison_recv) poison_with(l.recv, n, elem, [&](void* d) { p.fill_reduced(d, n, first); });
      p.fill_input(l.send, n * static_cast<std::size_t>(l.nranks), l.rank);
      return;
    }
  }
}

Pattern::Mismatch verify_result(const Layout& l, const Pattern& p) {
  const std::size_t n = l.count;
  switch (l.coll) {
    case Coll::AllReduce: return p.check_reduced(l.recv, n);
    case Coll::Reduce: return l.rank == p.root() ? p.check_reduced(l.recv, n) : Pattern::Mismatch{};
    case Coll::Broadcast: return p.check_input(l.recv, n, p.root());
    case Coll::ReduceScatter:
      return p.check_reduced(l.recv, n, static_cast<std::size_t>(l.rank) * n);
    case Coll::AllGather: break;
  }
  Pattern::Mismatch total;
  for (int r = 0; r < l.nranks; ++r) {
    const std::size_t block = static_cast<std::size_t>(r) * n;
    const Pattern::Mismatch m = p.check_input(at(l.recv, block, p.elem_size()), n, r);
    if (total.wrong == 0 && m.wrong > 0) total.first = block + m.first;
    total.wrong += m.wrong;
  }
  return total;
}

Work issue(Communicator& comm, const Layout& l, DataType dtype, RedOp op, int root,
           const CollOptions& o) {
  switch (l.coll) {
    case Coll::AllReduce: return comm.allreduce(l.send, l.recv, l.count, dtype, op, o);
    case Coll::AllGather: return comm.allgather(l.send, l.recv, l.count, dtype, o);
    case Coll::Broadcast: return comm.broadcast(l.send, l.recv, l.count, dtype, root, o);
    case Coll::Reduce: return comm.reduce(l.send, l.recv, l.count, dtype, op, root, o);
    case Coll::ReduceScatter: return comm.reduce_scatter(l.send, l.recv, l.count, dtype, op, o);
  }
  return {};
}

}  // namespace loom::perf
