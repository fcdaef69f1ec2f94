// Names that differ between the torch versions the backend builds against: the PyPI torch CI
// installs (2.15) and the GPU machines' torch (2.11), both compiled against here.
#pragma once

#include <torch/version.h>

#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

namespace loom_torch::compat {

#if TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR < 12
// torch 2.11: PREMUL_SUM's factor is NCCL's supplement, and the coalesced tensor forms report
// the older op types.
using PreMulSumSupplement = c10d::NCCLPreMulSumSupplement;
inline constexpr c10d::OpType kAllgatherIntoTensorCoalesced = c10d::OpType::ALLGATHER_COALESCED;
inline constexpr c10d::OpType kReduceScatterTensorCoalesced = c10d::OpType::COALESCED;
#else
using PreMulSumSupplement = c10d::PreMulSumSupplement;
inline constexpr c10d::OpType kAllgatherIntoTensorCoalesced =
    c10d::OpType::ALLGATHER_INTO_TENSOR_COALESCED;
inline constexpr c10d::OpType kReduceScatterTensorCoalesced =
    c10d::OpType::REDUCE_SCATTER_TENSOR_COALESCED;
#endif

}  // namespace loom_torch::compat
