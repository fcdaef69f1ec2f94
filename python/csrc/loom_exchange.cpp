// ProcessGroupLoom's data exchanges beyond the reductions: all-to-all (single tensor with or
// without split sizes, and lists), gather, scatter, send and recv. Every one moves bytes
// (loom::DataType::Uint8), so every dtype works; tensors that are not contiguous go through a
// contiguous copy whose result is copied back when the operation succeeds.
#include <c10/util/Exception.h>

#include <utility>

#include "loom_backend.hpp"
#include "pieces.hpp"
#include "tensor_args.hpp"

namespace loom_torch {
namespace {

void check_root(const char* name, int64_t root, int size) {
  TORCH_CHECK_VALUE(root >= 0 && root < size, "loom ", name, ": root ", root,
                    " is not a rank of this group of ", size);
}

void check_peer(const char* name, int peer, int rank, int size) {
  TORCH_CHECK_VALUE(peer >= 0 && peer < size, "loom ", name, ": peer ", peer,
                    " is not a rank of this group of ", size);
  TORCH_CHECK_VALUE(peer != rank, "loom ", name, ": rank ", rank, " cannot ", name,
                    " to or from itself");
}

void check_one_dtype(const char* name, const std::vector<at::Tensor>& tensors,
                     at::ScalarType dtype) {
  for (const auto& t : tensors)
    TORCH_CHECK_TYPE(t.scalar_type() == dtype, "loom ", name, ": tensors of dtype ", dtype, " and ",
                     t.scalar_type(), " in one call");
}

// The tensors of `list` packed into one contiguous flat buffer (their values copied when
// `fill`), with each one's byte count.
std::pair<at::Tensor, std::vector<std::size_t>> packed(const std::vector<at::Tensor>& list,
                                                       bool fill) {
  int64_t total = 0;
  std::vector<std::size_t> bytes;
  for (const auto& t : list) {
    total += t.numel();
    bytes.push_back(byte_count(t));
  }
  at::Tensor flat =
      at::empty({total}, list.front().options().memory_format(at::MemoryFormat::Contiguous));
  if (fill) {
    int64_t at = 0;
    for (const auto& t : list) {
      flat.narrow(0, at, t.numel()).copy_(t.reshape({t.numel()}));
      at += t.numel();
    }
  }
  return {flat, bytes};
}

// Copies consecutive pieces of `flat` into the tensors of `list` (their shapes).
std::function<void()> unpack_into(std::vector<at::Tensor> list, at::Tensor flat) {
  return [list = std::move(list), flat]() mutable {
    int64_t at = 0;
    for (auto& t : list) {
      t.copy_(flat.narrow(0, at, t.numel()).view(t.sizes()));
      at += t.numel();
    }
  };
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_split_sizes,
    std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions& opts) {
  const char* name = "all_to_all_single";
  check_devices(name, {output, input});
  check_one_dtype(name, {output}, input.scalar_type());
  AlltoallLayout sl = alltoall_layout("input", input, input_split_sizes, size_);
  AlltoallLayout rl = alltoall_layout("output", output, output_split_sizes, size_);
  at::Tensor in = contiguous_staging(input);
  at::Tensor out = contiguous_staging(output);
  Piece p{{in, out}, copy_back_if_staged(output, out), {}};
  const bool even = input_split_sizes.empty() && output_split_sizes.empty();
  const std::size_t block = sl.counts.front();
  // Equal blocks: every rank has the same block size, so an empty exchange is empty on all.
  if (!even || block > 0) {
    const void* send = in.data_ptr();
    void* recv = out.data_ptr();
    TORCH_CHECK_VALUE(!even || rl.counts.front() == block, "loom ", name, ": the output has ",
                      output.numel(), " elements, the input ", input.numel(),
                      " (equal splits need the same size)");
    p.issue = [=, sl = std::move(sl), rl = std::move(rl)](loom::Communicator& c,
                                                          const loom::CollOptions& co) {
      if (even) return c.alltoall(send, recv, block, loom::DataType::Uint8, co);
      return c.alltoallv(send, sl.counts, sl.displs, recv, rl.counts, rl.displs,
                         loom::DataType::Uint8, co);
    };
  }
  IssuedOp op = new_op(c10d::OpType::ALLTOALL_BASE, name, {output});
  return run_pieces(LOOM_TORCH_LAUNCHER, std::move(op), {std::move(p)});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::alltoall(std::vector<at::Tensor>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::AllToAllOptions& opts) {
  const char* name = "all_to_all";
  TORCH_CHECK_VALUE(
      static_cast<int>(inputs.size()) == size_ && static_cast<int>(outputs.size()) == size_,
      "loom ", name, ": ", inputs.size(), " input and ", outputs.size(),
      " output tensors for a group of ", size_);
  check_devices(name, inputs);
  check_devices(name, outputs);
  check_devices(name, {inputs.front(), outputs.front()});
  check_one_dtype(name, inputs, inputs.front().scalar_type());
  check_one_dtype(name, outputs, inputs.front().scalar_type());
  auto [send_flat, send_bytes] = packed(inputs, true);
  auto [recv_flat, recv_bytes] = packed(outputs, false);
  Piece p{{send_flat, recv_flat}, unpack_into(outputs, recv_flat), {}};
  const void* send = send_flat.data_ptr();
  void* recv = recv_flat.data_ptr();
  p.issue = [=, sb = std::move(send_bytes), rb = std::move(recv_bytes)](
                loom::Communicator& c, const loom::CollOptions& co) {
    return c.alltoallv(send, sb, recv, rb, loom::DataType::Uint8, co);
  };
  IssuedOp op = new_op(c10d::OpType::ALLTOALL, name, outputs);
  return run_pieces(LOOM_TORCH_LAUNCHER, std::move(op), {std::move(p)});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  const char* name = "gather";
  check_single(name, inputs);
  check_devices(name, inputs);
  check_root(name, opts.rootRank, size_);
  const bool is_root = rank_ == opts.rootRank;
  const at::Tensor& input = inputs[0];
  at::Tensor in = contiguous_staging(input);
  Piece p{{in}, {}, {}};
  std::vector<at::Tensor> results;
  void* recv = nullptr;
  if (is_root) {
    TORCH_CHECK_VALUE(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_,
                      "loom gather: the root takes one list of ", size_, " output tensors");
    check_devices(name, outputs[0]);
    check_devices(name, {input, outputs[0].front()});
    check_same_shape(name, outputs[0], input.scalar_type(), input.numel());
    at::Tensor flat = flat_buffer(input, size_);
    p.keep.push_back(flat);
    p.copy_back = unpack_into(outputs[0], flat);
    recv = flat.data_ptr();
    results = outputs[0];
  } else {
    TORCH_CHECK_VALUE(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                      "loom gather: only the root (rank ", opts.rootRank, ") takes output tensors");
  }
  const std::size_t bytes = byte_count(input);
  if (bytes > 0) {
    const void* send = in.data_ptr();
    const int root = static_cast<int>(opts.rootRank);
    p.issue = [=](loom::Communicator& c, const loom::CollOptions& co) {
      return c.gather(send, recv, bytes, loom::DataType::Uint8, root, co);
    };
  }
  IssuedOp op = new_op(c10d::OpType::GATHER, name, results);
  return run_pieces(LOOM_TORCH_LAUNCHER, std::move(op), {std::move(p)});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  const char* name = "scatter";
  check_single(name, outputs);
  check_devices(name, outputs);
  check_root(name, opts.rootRank, size_);
  const bool is_root = rank_ == opts.rootRank;
  const at::Tensor& output = outputs[0];
  at::Tensor out = contiguous_staging(output);
  Piece p{{out}, copy_back_if_staged(output, out), {}};
  const void* send = nullptr;
  if (is_root) {
    TORCH_CHECK_VALUE(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
                      "loom scatter: the root takes one list of ", size_, " input tensors");
    check_devices(name, inputs[0]);
    check_devices(name, {output, inputs[0].front()});
    check_same_shape(name, inputs[0], output.scalar_type(), output.numel());
    at::Tensor flat = packed(inputs[0], true).first;
    p.keep.push_back(flat);
    send = flat.data_ptr();
  } else {
    TORCH_CHECK_VALUE(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                      "loom scatter: only the root (rank ", opts.rootRank, ") takes input tensors");
  }
  const std::size_t bytes = byte_count(output);
  if (bytes > 0) {
    void* recv = out.data_ptr();
    const int root = static_cast<int>(opts.rootRank);
    p.issue = [=](loom::Communicator& c, const loom::CollOptions& co) {
      return c.scatter(send, recv, bytes, loom::DataType::Uint8, root, co);
    };
  }
  IssuedOp op = new_op(c10d::OpType::SCATTER, name, outputs);
  return run_pieces(LOOM_TORCH_LAUNCHER, std::move(op), {std::move(p)});
}

// send and recv: always issued, also when empty, so that loom numbers the message and a size
// that differs from the peer's fails with Mismatch instead of waiting.
c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::send(std::vector<at::Tensor>& tensors,
                                                      int dst_rank, int tag) {
  check_single("send", tensors);
  check_devices("send", tensors);
  check_peer("send", dst_rank, rank_, size_);
  at::Tensor buf = contiguous_staging(tensors[0]);
  const void* ptr = buf.data_ptr();
  const std::size_t bytes = byte_count(buf);
  Piece p{{buf}, {}, [=](loom::Communicator& c, const loom::CollOptions& co) {
            return c.send(ptr, bytes, loom::DataType::Uint8, dst_rank, tag, co);
          }};
  IssuedOp op = new_op(c10d::OpType::SEND, "send", tensors);
  return run_pieces(
      [this](IssuedOp o, const Issue& issue) {
        return launch(std::move(o), c10d::kUnsetTimeout, issue);
      },
      std::move(op), {std::move(p)});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::recv(std::vector<at::Tensor>& tensors,
                                                      int src_rank, int tag) {
  check_single("recv", tensors);
  check_devices("recv", tensors);
  check_peer("recv", src_rank, rank_, size_);
  const at::Tensor& t = tensors[0];
  at::Tensor buf = contiguous_staging(t);
  void* ptr = buf.data_ptr();
  const std::size_t bytes = byte_count(buf);
  Piece p{{t, buf},
          copy_back_if_staged(t, buf),
          [=](loom::Communicator& c, const loom::CollOptions& co) {
            return c.recv(ptr, bytes, loom::DataType::Uint8, src_rank, tag, co);
          }};
  IssuedOp op = new_op(c10d::OpType::RECV, "recv", tensors);
  return run_pieces(
      [this](IssuedOp o, const Issue& issue) {
        return launch(std::move(o), c10d::kUnsetTimeout, issue);
      },
      std::move(op), {std::move(p)});
}

// recv with src=None: loom's recv_any, which reports the sender (LoomWork::sourceRank()).
c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::recvAnysource(std::vector<at::Tensor>& tensors,
                                                               int tag) {
  check_single("recv", tensors);
  check_devices("recv", tensors);
  const at::Tensor& t = tensors[0];
  at::Tensor buf = contiguous_staging(t);
  void* ptr = buf.data_ptr();
  const std::size_t bytes = byte_count(buf);
  auto source = std::make_shared<int>(-1);
  Piece p{{t, buf},
          copy_back_if_staged(t, buf),
          [=](loom::Communicator& c, const loom::CollOptions& co) {
            return c.recv_any(ptr, bytes, loom::DataType::Uint8, source.get(), tag, co);
          }};
  IssuedOp op = new_op(c10d::OpType::RECVANYSOURCE, "recvAnysource", tensors);
  op.source = std::move(source);
  return run_pieces(
      [this](IssuedOp o, const Issue& issue) {
        return launch(std::move(o), c10d::kUnsetTimeout, issue);
      },
      std::move(op), {std::move(p)});
}

}  // namespace loom_torch
