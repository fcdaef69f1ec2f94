// What the backend's operations share: a torch op becomes one or more Pieces (one loom call
// each, with the tensors it needs alive and the copy back of staged results), launched
// together as one IssuedOp by run_pieces.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <loom/communicator.hpp>
#include <string>
#include <utility>
#include <vector>

#include "loom_work.hpp"
#include "tensor_args.hpp"

namespace loom_torch {

// One loom call of a torch op: what it needs alive, how results get back, how to issue it.
struct Piece {
  std::vector<at::Tensor> keep;
  std::function<void()> copy_back;  // empty when the call writes the caller's tensor itself
  std::function<loom::Work(loom::Communicator&, const loom::CollOptions&)> issue;  // empty: 0 B
};

inline IssuedOp new_op(c10d::OpType type, std::string name, std::vector<at::Tensor> outputs) {
  IssuedOp op;
  op.type = type;
  op.name = std::move(name);
  op.outputs = std::move(outputs);
  return op;
}

inline std::function<void()> copy_back_if_staged(const at::Tensor& dst, const at::Tensor& staged) {
  if (dst.is_same(staged)) return {};
  return [dst, staged]() mutable { dst.copy_(staged); };
}

/// The issue of an allgather of contiguous `in`'s bytes into contiguous `out` (size() times as
/// many); empty when `in` has no bytes.
inline std::function<loom::Work(loom::Communicator&, const loom::CollOptions&)> allgather_bytes(
    const at::Tensor& in, const at::Tensor& out) {
  const std::size_t bytes = byte_count(in);
  if (bytes == 0) return {};
  const void* send = in.data_ptr();
  void* recv = out.data_ptr();
  return [=](loom::Communicator& c, const loom::CollOptions& co) {
    return c.allgather(send, recv, bytes, loom::DataType::Uint8, co);
  };
}

/// `co` with PREMUL_SUM's factor when the reduction is one.
inline loom::CollOptions with_scalar(const loom::CollOptions& co, const ReduceMapping& m) {
  loom::CollOptions o = co;
  o.scalar = m.scalar;
  return o;
}

/// Launches `pieces` as one op through `launch` (ProcessGroupLoom::launch with the op's timeout);
/// `grouped`: inside one loom group (group_start/group_end), so that loom fuses allreduces.
inline c10::intrusive_ptr<c10d::Work> run_pieces(
    const std::function<c10::intrusive_ptr<c10d::Work>(
        IssuedOp, const std::function<void(loom::Communicator&, const loom::CollOptions&,
                                           std::vector<loom::Work>&)>&)>& launch,
    IssuedOp op, std::vector<Piece> pieces, bool grouped = false) {
  std::vector<std::function<void()>> copies;
  for (auto& p : pieces) {
    op.keep_alive.insert(op.keep_alive.end(), p.keep.begin(), p.keep.end());
    if (p.copy_back) copies.push_back(std::move(p.copy_back));
  }
  if (!copies.empty()) {
    op.on_success = [copies = std::move(copies)] {
      for (const auto& c : copies) c();
    };
  }
  return launch(std::move(op), [pieces = std::move(pieces), grouped](
                                   loom::Communicator& comm, const loom::CollOptions& co,
                                   std::vector<loom::Work>& works) {
    if (grouped) comm.group_start();
    try {
      for (const auto& p : pieces)
        if (p.issue) works.push_back(p.issue(comm, co));
    } catch (...) {
      if (grouped) comm.group_end();  // the calls recorded so far still run
      throw;
    }
    if (grouped) comm.group_end();
  });
}

// Inside a ProcessGroupLoom member taking `opts`: launches with the op's timeout.
#define LOOM_TORCH_LAUNCHER                           \
  [this, &opts](IssuedOp o, const Issue& issue) {     \
    return launch(std::move(o), opts.timeout, issue); \
  }

}  // namespace loom_torch
