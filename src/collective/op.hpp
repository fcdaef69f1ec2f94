// One collective call as every layer sees it: what was asked, validated, and how it is named in
// messages and errors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "collective/kinds.hpp"
#include "common/status.hpp"
#include "loom/types.hpp"

namespace loom::coll {

struct OpDesc {
  CollKind kind = CollKind::AllReduce;
  DataType dtype = DataType::Uint8;
  RedOp redop = RedOp::Sum;
  int root = -1;
  std::size_t count =
      0;  // the call's count argument (allgather: per rank; reduce_scatter: recvcount)
  const void* send = nullptr;
  void* recv = nullptr;
  std::uint64_t seq = 0;  // assigned at submission

  [[nodiscard]] bool has_redop() const {
    return kind == CollKind::AllReduce || kind == CollKind::Reduce ||
           kind == CollKind::ReduceScatter;
  }
  [[nodiscard]] bool has_root() const {
    return kind == CollKind::Broadcast || kind == CollKind::Reduce;
  }
  [[nodiscard]] std::size_t send_bytes(int nranks) const;
  [[nodiscard]] std::size_t recv_bytes(int nranks) const;
  [[nodiscard]] bool in_place(int rank) const;
  /// True when `rank` holds a result of an Avg reduction: it divides its own copy by n at the
  /// end (Avg reduces as Sum until then).
  [[nodiscard]] bool divides_for_avg(int rank) const {
    return has_redop() && redop == RedOp::Avg && count != 0 &&
           !(kind == CollKind::Reduce && rank != root);
  }
};

/// Checks arguments before anything is queued; errors name the rank and the operation.
Status validate(const OpDesc& op, int rank, int nranks);

/// "allreduce #42 (1024 x float, sum)".
std::string describe(const OpDesc& op);

}  // namespace loom::coll
