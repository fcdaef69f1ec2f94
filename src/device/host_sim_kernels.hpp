// The CUDA kernels' logic (kernels/cuda/reduce_logic.hpp) run on the host over an emulated grid:
// what the host-sim device "launches".
#pragma once

#include <cstddef>

#include "kernels/cuda/reduce_cuda.hpp"
#include "loom/types.hpp"

namespace loom::device::sim {

/// Runs every thread of the grid the CUDA launch would use (sm_count SMs) in turn.
void reduce(DataType dtype, RedOp op, void* dst, const void* a, const void* b, std::size_t count,
            int sm_count);
void divide(DataType dtype, void* x, std::size_t count, int n, int sm_count);
/// The multi-buffer kernel (kernels/cuda/reduce_multi_logic.hpp), skip word included.
void reduce_multi(DataType dtype, RedOp op, const kernels::cuda::MultiArgs& args, int sm_count);

}  // namespace loom::device::sim
