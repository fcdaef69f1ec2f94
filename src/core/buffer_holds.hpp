// The loom::host_alloc buffers a call names stay mapped until its task is done: host_free of one
// that is still in use is deferred to then (common/shared_buffers.hpp).
#pragma once

#include <vector>

#include "collective/op.hpp"
#include "common/shared_buffers.hpp"
#include "core/group_tasks.hpp"
#include "executor/task.hpp"

namespace loom::detail {

/// Holds the buffers of `op` (its send and receive extents on `nranks` ranks) for `task`.
inline void hold_buffers(exec::Task& task, const coll::OpDesc& op, int nranks) {
  if (auto h = shared_buffers::hold(op.send, op.send_bytes(nranks))) task.keep(std::move(h));
  if (auto h = shared_buffers::hold(op.recv, op.recv_bytes(nranks))) task.keep(std::move(h));
}

/// Holds the buffers of a fused group's calls for `task`.
inline void hold_buffers(exec::Task& task, const std::vector<FusedPiece>& pieces) {
  for (const FusedPiece& f : pieces) {
    if (auto h = shared_buffers::hold(f.send, f.bytes)) task.keep(std::move(h));
    if (auto h = shared_buffers::hold(f.recv, f.bytes)) task.keep(std::move(h));
  }
}

/// `task` holding the buffers of `op`, or of `fused` when given.
template <typename T>
std::unique_ptr<T> holding_buffers(std::unique_ptr<T> task, const coll::OpDesc& op, int nranks,
                                   const std::vector<FusedPiece>* fused = nullptr) {
  if (fused != nullptr)
    hold_buffers(*task, *fused);
  else
    hold_buffers(*task, op, nranks);
  return task;
}

}  // namespace loom::detail
