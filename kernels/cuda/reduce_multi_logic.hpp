// The logic of the multi-buffer kernel (reduce_multi.cu), as __host__ __device__ functions: the
// peer-read route's one kernel per rank and call (src/device/peer_read.hpp) reduces a block of
// every rank's input, in rank order, and writes the result to one or several outputs (a copy
// when there is one input). Built from the two-input kernels' pieces (reduce_logic.hpp): the
// same element operators, 16-byte packs and head/vectors/tail split, so that n inputs give,
// bit for bit, what n - 1 launches of the two-input kernel give (src[0] OP src[1], then OP
// src[2], ...), and Avg what the divide kernel gives after them. The host unit tests
// (tests/unit/test_cuda_kernel_logic.cpp) run these functions for every thread of an emulated
// grid; host-sim launches them the same way.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/reduce_cuda.hpp"
#include "kernels/cuda/reduce_logic.hpp"

namespace loom::kernels::cuda {

/// The split of a launch: vectors only where every source and destination shares one
/// alignment modulo 16 bytes (a multiple of the element size), else everything scalar.
LOOM_HD constexpr Split split_multi(const MultiArgs& a, std::size_t elem) noexcept {
  const auto first = reinterpret_cast<std::uintptr_t>(a.nsrc > 0 ? a.src[0] : a.dst[0]);
  const std::uintptr_t mis = first % kVectorBytes;
  bool shared = true;
  for (int k = 0; k < a.nsrc; ++k)
    shared = shared && reinterpret_cast<std::uintptr_t>(a.src[k]) % kVectorBytes == mis;
  for (int k = 0; k < a.ndst; ++k)
    shared = shared && reinterpret_cast<std::uintptr_t>(a.dst[k]) % kVectorBytes == mis;
  if (!shared) {
    Split s;
    s.count = a.count;
    return s;
  }
  return split_for_vectors(first, first, first, a.count, elem);
}

/// Whether the launch is abandoned (MultiArgs::skip_word): read once per block on a device.
LOOM_HD inline bool multi_skipped(const MultiArgs& a) noexcept {
  if (a.skip_word == nullptr) return false;
  const std::uint32_t from = *a.skip_word;
  return from != 0 && static_cast<std::int32_t>(a.ticket - from) >= 0;
}

/// The elements of thread `tid` of `nthreads`: every destination gets the sources reduced in
/// order (then divided). Each element's sources are read before any destination is written, so
/// a destination may be exactly a source.
template <typename E, typename Op, typename Mem>
LOOM_HD void reduce_multi_thread(const MultiArgs& a, const Split& s, std::size_t tid,
                                 std::size_t nthreads) {
  using S = typename E::S;
  constexpr std::size_t kN = Pack<S>::kN;
  auto src = [&](int k) { return static_cast<const S*>(a.src[k]); };
  auto dst = [&](int k) { return static_cast<S*>(a.dst[k]); };
  for (std::size_t v = tid; v < s.nvec; v += nthreads) {
    const std::size_t i = s.head + v * kN;
    Pack<S> acc = Mem::load(src(0) + i);
    for (int k = 1; k < a.nsrc; ++k) acc = reduce_pack<E, Op>(acc, Mem::load(src(k) + i));
    if (a.divide_by > 0) acc = divide_pack<E>(acc, a.divide_by);
    for (int k = 0; k < a.ndst; ++k) Mem::store(dst(k) + i, acc);
  }
  const std::size_t nscalar = s.scalars();
  for (std::size_t k = tid; k < nscalar; k += nthreads) {
    const std::size_t i = s.scalar_index(k);
    S acc = src(0)[i];
    for (int j = 1; j < a.nsrc; ++j) acc = combine<E, Op>(acc, src(j)[i]);
    if (a.divide_by > 0) acc = divide<E>(acc, a.divide_by);
    for (int j = 0; j < a.ndst; ++j) dst(j)[i] = acc;
  }
}

/// Whether a launch is well formed: 1..kMaxMultiPointers sources and destinations.
LOOM_HD constexpr bool multi_valid(const MultiArgs& a) noexcept {
  return a.nsrc >= 1 && a.nsrc <= kMaxMultiPointers && a.ndst >= 1 && a.ndst <= kMaxMultiPointers &&
         a.divide_by >= 0;
}

}  // namespace loom::kernels::cuda
