// Where each collective's send and receive data live, how to fill them and how to verify them.
#pragma once

#include <cstddef>

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
  std::size_t count = 0;  // per-rank count as passed to the collective
  int rank = 0;
  int nranks = 1;
};

/// Places the buffers nccl-tests style: out-of-place uses both buffers; in-place uses `sendbuf`
/// for allreduce/broadcast/reduce (send == recv), recv + rank * count as the send buffer of
/// allgather, and send + rank * count as the receive buffer of reduce-scatter.
Layout make_layout(Coll coll, bool in_place, void* sendbuf, void* recvbuf, std::size_t count,
                   std::size_t elem_size, int rank, int nranks);

/// Writes this rank's input. With `poison`, first fills every element the collective must write
/// with a value different from the expected one, so an element left untouched counts as wrong.
void prepare_buffers(const Layout& layout, const Pattern& pattern, bool poison);

/// Counts this rank's wrong result elements (none off the root for reduce).
Pattern::Mismatch verify_result(const Layout& layout, const Pattern& pattern);

/// Starts the collective described by `layout` (with `opts`, e.g. a stream).
Work issue(Communicator& comm, const Layout& layout, DataType dtype, RedOp op, int root,
           const CollOptions& opts = {});

}  // namespace loom::perf
