// all_reduce of sparse COO tensors on the host: what DDP needs for sparse gradients
// (nn.Embedding(sparse=True)). The sum of sparse tensors is their indices and values side by
// side, coalesced: every rank gathers every rank's coalesced indices and values (padded to the
// largest count, in two loom allgathers side by side), concatenates them in rank order and
// coalesces, so that every rank computes the same bits.
//
// Two phases: the ranks' entry counts and shapes (a few int64 each) are gathered and waited for
// in the call; the gather of indices and values runs as the returned Work, and its settling
// writes the sum into the caller's tensor.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <string>
#include <vector>

#include "loom_backend.hpp"
#include "pieces.hpp"

namespace loom_torch {
namespace {

constexpr const char* kName = "all_reduce of a sparse tensor";

// One rank's description: [nnz, sparse_dim, dense_dim, sizes...].
std::vector<int64_t> describe(const at::Tensor& coalesced) {
  std::vector<int64_t> d{coalesced._nnz(), coalesced.sparse_dim(), coalesced.dense_dim()};
  for (const int64_t s : coalesced.sizes()) d.push_back(s);
  return d;
}

std::string shape_text(const at::Tensor& row) {
  std::string s = "sparse_dim " + std::to_string(row[1].item<int64_t>()) + ", dense_dim " +
                  std::to_string(row[2].item<int64_t>()) + ", size [";
  for (int64_t i = 3; i < row.numel(); ++i)
    s += (i > 3 ? ", " : "") + std::to_string(row[i].item<int64_t>());
  return s + "]";
}

/// Every rank's description must match rank 0's except for nnz; all ranks see the same table,
/// so all raise together, with the same message.
void check_shapes(const at::Tensor& table) {
  const auto shape = [&](int64_t r) { return table[r].narrow(0, 1, table.size(1) - 1); };
  for (int64_t r = 1; r < table.size(0); ++r) {
    if (at::equal(shape(r), shape(0))) continue;
    TORCH_CHECK_VALUE(false, "loom ", kName, ": rank ", r, "'s tensor has ", shape_text(table[r]),
                      ", rank 0's has ", shape_text(table[0]),
                      " (every rank must pass the same shape)");
  }
}

/// `t` padded with zeros along `dim` to `n` entries.
at::Tensor padded(const at::Tensor& t, int64_t dim, int64_t n) {
  std::vector<int64_t> sizes = t.sizes().vec();
  sizes[dim] = n;
  at::Tensor out = at::zeros(sizes, t.options());
  out.narrow(dim, 0, t.size(dim)).copy_(t);
  return out;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::allreduce_sparse_host(
    at::Tensor& tensor, const c10d::AllreduceOptions& opts) {
  TORCH_CHECK_VALUE(tensor.layout() == at::kSparse, "loom ", kName, ": got layout ",
                    tensor.layout(), "; only sparse COO tensors are reduced this way");
  TORCH_CHECK_VALUE(tensor.device().is_cpu(), "loom ", kName, ": got a tensor on ", tensor.device(),
                    "; loom reduces sparse tensors on the host only");
  const auto op = opts.reduceOp.op_;
  const bool avg = op == c10d::ReduceOp::AVG;
  TORCH_CHECK_VALUE(op == c10d::ReduceOp::SUM || avg, "loom ", kName,
                    ": only ReduceOp.SUM and AVG add sparse tensors (their indices are joined)");
  TORCH_CHECK_TYPE(
      !avg || at::isFloatingType(tensor.scalar_type()) || at::isComplexType(tensor.scalar_type()),
      "loom ", kName,
      ": ReduceOp.AVG of a sparse tensor needs a floating or "
      "complex dtype, got ",
      tensor.scalar_type());
  {
    std::lock_guard lk(mu_);
    TORCH_CHECK(!coalescing_, "loom ", kName,
                " cannot run inside a coalescing group "
                "(its entry counts are exchanged first)");
  }
  const at::Tensor input = tensor.coalesce();
  const std::vector<int64_t> desc = describe(input);
  const at::Tensor mine = at::tensor(desc, at::kLong);
  at::Tensor table = at::empty({size_, static_cast<int64_t>(desc.size())}, at::kLong);
  c10d::AllgatherOptions gather_opts;
  gather_opts.timeout = opts.timeout;
  allgather_one("all_reduce of a sparse tensor (entry counts)", c10d::OpType::ALLREDUCE, table,
                mine, gather_opts)
      ->wait();
  check_shapes(table);

  const int64_t most = table.select(1, 0).max().item<int64_t>();
  const at::Tensor idx = padded(input._indices(), 1, most);
  const at::Tensor val = padded(input._values(), 0, most);
  std::vector<int64_t> idx_all_sizes{size_};
  std::vector<int64_t> val_all_sizes{size_};
  for (const int64_t s : idx.sizes()) idx_all_sizes.push_back(s);
  for (const int64_t s : val.sizes()) val_all_sizes.push_back(s);
  const at::Tensor idx_all = at::empty(idx_all_sizes, idx.options());
  const at::Tensor val_all = at::empty(val_all_sizes, val.options());

  IssuedOp issued = new_op(c10d::OpType::ALLREDUCE, kName, {tensor});
  issued.on_success = [tensor, table, idx_all, val_all, avg, ws = size_]() mutable {
    std::vector<at::Tensor> indices;
    std::vector<at::Tensor> values;
    for (int r = 0; r < ws; ++r) {
      const int64_t n = table[r][0].item<int64_t>();
      indices.push_back(idx_all[r].narrow(1, 0, n));
      values.push_back(val_all[r].narrow(0, 0, n));
    }
    at::Tensor sum =
        at::sparse_coo_tensor(at::cat(indices, 1), at::cat(values, 0), tensor.sizes()).coalesce();
    if (avg) sum = sum / ws;
    tensor.copy_(sum);
  };
  return run_pieces(LOOM_TORCH_LAUNCHER, std::move(issued),
                    {Piece{{idx, idx_all}, {}, allgather_bytes(idx, idx_all)},
                     Piece{{val, val_all}, {}, allgather_bytes(val, val_all)}},
                    /*grouped=*/true);
}

}  // namespace loom_torch
