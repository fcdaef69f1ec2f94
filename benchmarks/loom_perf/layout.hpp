// Where each collective's send and receive data live, how to fill them and how to verify them.
#pragma once

#include <cstddef>
#include <vector>

#include "benchmarks/loom_perf/options.hpp"
#include "benchmarks/loom_perf/patterns.hpp"
#include "loom/communicator.hpp"

namespace loom::perf {

/// The arguments of one collective call on one rank.
struct Layout {
  Coll coll = Coll::AllReduce;
  bool in_place = false;
  void* send = nullptr;
  void* recv = nullptr;
  std::size_t count = 0;  // per-rank count as passed to the collective (alltoallv: one unit)
  int rank = 0;
  int nranks = 1;
  int root = 0;
  // alltoallv: elements exchanged with each peer and their offsets, the same both ways (the
  // skewed split is symmetric), packed in rank order.
  std::vector<std::size_t> counts;
  std::vector<std::size_t> displs;
};

/// Where rank `rank`'s alltoallv block for `peer` starts in its send buffer, in elements.
std::size_t alltoallv_displ(int rank, int peer, int nranks, std::size_t unit);

/// Places the buffers nccl-tests style: out-of-place uses both buffers; in-place uses `sendbuf`
/// for allreduce/broadcast/reduce/alltoall(v) (send == recv), recv + rank * count as the send
/// buffer of allgather and gather, and send + rank * count as the receive buffer of
/// reduce-scatter and scatter (gather and scatter: on every rank; loom reads them as in place on
/// the root only).
Layout make_layout(Coll coll, bool in_place, void* sendbuf, void* recvbuf, std::size_t count,
                   std::size_t elem_size, int rank, int nranks, int root = 0);

/// The elements this rank's result occupies (where verify_result looks), or {nullptr, 0} when it
/// receives nothing (reduce and gather off the root).
struct Region {
  void* data = nullptr;
  std::size_t count = 0;
};
Region result_region(const Layout& layout);

/// Writes this rank's input. With `poison`, first fills every element the collective must write
/// with a value different from the expected one, so an element left untouched counts as wrong.
void prepare_buffers(const Layout& layout, const Pattern& pattern, bool poison);

/// Counts this rank's wrong result elements (none off the root for reduce and gather).
Pattern::Mismatch verify_result(const Layout& layout, const Pattern& pattern);

/// Starts the collective described by `layout` (with `opts`, e.g. a stream).
Work issue(Communicator& comm, const Layout& layout, DataType dtype, RedOp op, int root,
           const CollOptions& opts = {});

}  // namespace loom::perf
