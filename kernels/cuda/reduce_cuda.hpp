// Entry points of the CUDA reduction kernels (reduce_kernels.cu), callable from plain C++: the
// stream is a cudaStream_t passed as void*, the result a cudaError_t as int (0 == cudaSuccess).
// Only built when LOOM_HAVE_CUDA; the device seam (src/device/cuda_device.cpp) is the one caller.
#pragma once

#include <cstddef>

#include "loom/types.hpp"

namespace loom::kernels::cuda {

/// Enqueues dst[i] = a[i] OP b[i] (i < count) on `stream`. dst may be exactly a or b. Every
/// pointer must be aligned to the element size. RedOp::Avg reduces as Sum (see divide_async), as
/// does RedOp::PreMulSum (see scale_async); BitAnd/BitOr/BitXor exist for the integer types: a
/// pair that loom::supports() refuses returns cudaErrorInvalidValue.
/// `sm_count` sizes the grid. Returns the launch's cudaError_t.
int reduce_async(DataType dtype, RedOp op, void* dst, const void* a, const void* b,
                 std::size_t count, int sm_count, void* stream);

/// Enqueues x[i] = x[i] / n (i < count) on `stream`, as kernels::finalize_avg computes it.
int divide_async(DataType dtype, void* x, std::size_t count, int n, int sm_count, void* stream);

/// Enqueues dst[i] = src[i] * scalar (i < count) on `stream`, as kernels::scale computes it
/// (PreMulSum's local step: integers multiply by the truncated, clamped scalar and wrap; floats
/// round once, the scalar rounded to fp32 except for fp64). dst may be exactly src; pointers
/// aligned to the element size. Every dtype; an invalid one returns cudaErrorInvalidValue.
int scale_async(DataType dtype, void* dst, const void* src, std::size_t count, double scalar,
                int sm_count, void* stream);

/// Loads every kernel above onto the current device now. CUDA loads a kernel lazily, at its
/// first launch, and a lazy load waits for the device's streams: one that a caller's stream
/// holds (loom's stream gate, a host function waiting for the collective) would never come.
/// Returns a cudaError_t.
int load_kernels();

}  // namespace loom::kernels::cuda
