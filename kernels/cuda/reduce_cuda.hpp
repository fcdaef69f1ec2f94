// Entry points of the CUDA reduction kernels (reduce_kernels.cu), callable from plain C++: the
// stream is a cudaStream_t passed as void*, the result a cudaError_t as int (0 == cudaSuccess).
// Only built when LOOM_HAVE_CUDA; the device seam (src/device/cuda_device.cpp) is the one caller.
#pragma once

#include <cstddef>
#include <cstdint>

#include "loom/types.hpp"

namespace loom::kernels::cuda {

/// The most sources and destinations of one multi-buffer launch (reduce_multi_async): the ranks
/// of a host whose buffers one launch reads or writes.
inline constexpr int kMaxMultiPointers = 16;

/// One launch of the multi-buffer kernel (passed by value as its parameters): every destination
/// gets src[0] OP src[1] OP ... OP src[nsrc-1] (rank order, rounded after each operation as the
/// two-input kernel does), divided by `divide_by` when it is positive (Avg: as the divide kernel
/// after the sum). One source is a copy to every destination. A destination may be exactly a
/// source (in place); otherwise they must not overlap. When `skip_word` is set (a device pointer
/// of host-mapped memory) and holds a ticket at or before `ticket` (cyclically, non-zero), the
/// launch does nothing: the calls from that ticket on were abandoned.
struct MultiArgs {
  const void* src[kMaxMultiPointers] = {};
  void* dst[kMaxMultiPointers] = {};
  int nsrc = 0;
  int ndst = 0;
  std::size_t count = 0;  // elements
  int divide_by = 0;
  const volatile std::uint32_t* skip_word = nullptr;
  std::uint32_t ticket = 0;
};

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

/// Enqueues the multi-buffer kernel (MultiArgs) for `dtype` and `op` on `stream`. An invalid
/// pair, no source or no destination, or more than kMaxMultiPointers returns
/// cudaErrorInvalidValue.
int reduce_multi_async(DataType dtype, RedOp op, const MultiArgs& args, int sm_count, void* stream);

/// Loads the multi-buffer kernels (reduce_multi_async) onto the current device now; part of
/// load_kernels. Returns a cudaError_t.
int load_multi_kernels();

/// Loads every kernel above onto the current device now. CUDA loads a kernel lazily, at its
/// first launch, and a lazy load waits for the device's streams: one that a caller's stream
/// holds (loom's stream gate, a host function waiting for the collective) would never come.
/// Returns a cudaError_t.
int load_kernels();

}  // namespace loom::kernels::cuda
