// Checks and maps what torch.distributed hands the backend (tensors, dtypes, ReduceOps) to what
// loom's public API takes. Everything here throws a torch error (RuntimeError / ValueError /
// TypeError in Python) whose message starts with "loom" and names the operation.
#pragma once

#include <ATen/ATen.h>

#include <cstddef>
#include <loom/types.hpp>
#include <string>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <vector>

namespace loom_torch {

/// How a reduction on one torch dtype runs in loom: the element type, the operator and how many
/// loom elements make one torch element (2 for complex tensors, reduced as their real view).
struct ReduceMapping {
  loom::DataType dtype;
  loom::RedOp op;
  std::size_t elems_per_element = 1;
  double scalar = 1.0;  // PREMUL_SUM's factor (CollOptions::scalar); 1 for the other ops
};

/// The loom element type and operator for a reduction, or an error naming the op, the dtype and
/// what loom supports. bool reduces as uint8 (SUM -> MAX, PRODUCT -> MIN: logical or / and);
/// complex64/128 reduce as float32/64 pairs for SUM, AVG and PREMUL_SUM. PREMUL_SUM takes its
/// factor from the ReduceOp's supplement (a double, or a one-element tensor read on the host);
/// the bitwise ops serve the integer types and bool.
ReduceMapping map_reduction(const char* op_name, at::ScalarType dtype, const c10d::ReduceOp& op);

/// Data-movement collectives (broadcast, allgather) copy bytes: every dtype works.
inline std::size_t byte_count(const at::Tensor& t) {
  return static_cast<std::size_t>(t.numel()) * t.element_size();
}

/// The one device every tensor of a call is on; refuses empty lists, mixed devices, sparse
/// tensors and devices this build cannot serve.
at::Device check_devices(const char* op_name, const std::vector<at::Tensor>& tensors);

/// Refuses lists other than exactly one tensor (torch's legacy multi-device form).
void check_single(const char* op_name, const std::vector<at::Tensor>& tensors);

/// Requires every tensor of `tensors` to have `dtype` and `numel` elements.
void check_same_shape(const char* op_name, const std::vector<at::Tensor>& tensors,
                      at::ScalarType dtype, int64_t numel);

/// A contiguous tensor with t's values: `t` itself when it is contiguous, otherwise a copy (the
/// caller copies results back).
at::Tensor contiguous_staging(const at::Tensor& t);

/// A contiguous [n * numel] buffer of `like`'s dtype/device.
at::Tensor flat_buffer(const at::Tensor& like, int64_t n);

/// Element counts and displacements (in bytes) of all_to_all_single's blocks for one side:
/// `splits` are torch's split sizes along dim 0 (empty: equal blocks).
struct AlltoallLayout {
  std::vector<std::size_t> counts;
  std::vector<std::size_t> displs;
};
AlltoallLayout alltoall_layout(const char* side, const at::Tensor& t,
                               const std::vector<int64_t>& splits, int size);

}  // namespace loom_torch
