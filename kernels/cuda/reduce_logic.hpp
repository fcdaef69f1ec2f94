// The logic of the CUDA reduction kernels, as __host__ __device__ functions: element codecs and
// operators, the per-vector (16-byte) step, the index arithmetic that splits a range into an
// unaligned head, whole 16-byte vectors and a tail, the per-thread loop, and the grid shape. The
// kernels in reduce_kernels.cu are thin wrappers around reduce_thread / divide_thread; the host
// unit tests (tests/unit/test_cuda_kernel_logic.cpp) run the very same functions for every
// thread of an emulated grid, for every dtype x op, size and alignment.
//
// Semantics are those of the host kernels (kernels/host/reduce.hpp), bit for bit: integers wrap,
// fp16/bf16/fp8 compute in fp32 and round to nearest even (the same conversion code, half.hpp and
// fp8.hpp: fp8 e4m3 saturates to +-448, e5m2 overflows to infinity), float min/max propagate NaN,
// Avg reduces as Sum and is divided once at the end, PreMulSum reduces as Sum after each rank has
// scaled its own input (scale_thread, as kernels::scale: integers wrap, floats round once), and the
// bitwise ops exist for the integer types only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/host/fp8.hpp"
#include "kernels/host/half.hpp"
#include "kernels/host/premul.hpp"

#if defined(__CUDACC__)
#define LOOM_HD __host__ __device__
#else
#define LOOM_HD
#endif

namespace loom::kernels::cuda {

inline constexpr std::size_t kVectorBytes = 16;

// ---- Element codecs: storage type S, compute type C. ----

template <typename T>
struct NativeCodec {
  using S = T;
  using C = T;
  LOOM_HD static constexpr C load(S v) noexcept { return v; }
  LOOM_HD static constexpr S store(C v) noexcept { return v; }
};

struct HalfCodec {
  using S = std::uint16_t;
  using C = float;
  LOOM_HD static constexpr C load(S v) noexcept { return detail::half_bits_widen(v); }
  LOOM_HD static constexpr S store(C v) noexcept { return detail::float_to_half_bits(v); }
};

struct BFloat16Codec {
  using S = std::uint16_t;
  using C = float;
  LOOM_HD static constexpr C load(S v) noexcept { return detail::bf16_bits_widen(v); }
  LOOM_HD static constexpr S store(C v) noexcept { return detail::float_to_bf16_bits(v); }
};

struct Fp8E4M3Codec {
  using S = std::uint8_t;
  using C = float;
  LOOM_HD static constexpr C load(S v) noexcept { return detail::fp8_e4m3_bits_to_float(v); }
  LOOM_HD static constexpr S store(C v) noexcept { return detail::float_to_fp8_e4m3_bits(v); }
};

struct Fp8E5M2Codec {
  using S = std::uint8_t;
  using C = float;
  LOOM_HD static constexpr C load(S v) noexcept { return detail::fp8_e5m2_bits_widen(v); }
  LOOM_HD static constexpr S store(C v) noexcept { return detail::float_to_fp8_e5m2_bits(v); }
};

// ---- Operators on the compute type. ----

template <typename T>
using WrapType = typename std::conditional_t<std::is_integral_v<T>, std::make_unsigned<T>,
                                             std::type_identity<T>>::type;

struct SumOp {
  template <typename T>
  LOOM_HD static constexpr T apply(T a, T b) noexcept {
    using U = WrapType<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  }
};

struct ProdOp {
  template <typename T>
  LOOM_HD static constexpr T apply(T a, T b) noexcept {
    using U = WrapType<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  }
};

template <typename T>
LOOM_HD constexpr bool is_nan(T v) noexcept {
  if constexpr (std::is_floating_point_v<T>) {
    return v != v;
  } else {
    return false;
  }
}

/// min(a, b) == std::min on NaN-free data; a NaN operand wins (a's when both are NaN).
struct MinOp {
  template <typename T>
  LOOM_HD static constexpr T apply(T a, T b) noexcept {
    return ((a <= b) | is_nan(a)) ? a : b;
  }
};

/// max(a, b) == std::max on NaN-free data; a NaN operand wins (a's when both are NaN).
struct MaxOp {
  template <typename T>
  LOOM_HD static constexpr T apply(T a, T b) noexcept {
    return ((b <= a) | is_nan(a)) ? a : b;
  }
};

/// Bitwise ops: integer types only (reduce_kernels.cu instantiates them for those alone).
struct BitAndOp {
  template <typename T>
  requires std::is_integral_v<T> LOOM_HD static constexpr T apply(T a, T b) noexcept {
    return static_cast<T>(a & b);
  }
};

struct BitOrOp {
  template <typename T>
  requires std::is_integral_v<T> LOOM_HD static constexpr T apply(T a, T b) noexcept {
    return static_cast<T>(a | b);
  }
};

struct BitXorOp {
  template <typename T>
  requires std::is_integral_v<T> LOOM_HD static constexpr T apply(T a, T b) noexcept {
    return static_cast<T>(a ^ b);
  }
};

template <typename E, typename Op>
LOOM_HD constexpr typename E::S combine(typename E::S a, typename E::S b) noexcept {
  return E::store(Op::template apply<typename E::C>(E::load(a), E::load(b)));
}

/// x / n as the host finalize_avg computes it: integers truncate (in >= 32 bits of the same
/// signedness), floats divide in the compute type and round.
template <typename E>
LOOM_HD constexpr typename E::S divide(typename E::S x, int n) noexcept {
  using C = typename E::C;
  if constexpr (std::is_integral_v<C>) {
    using Wide32 = std::conditional_t<std::is_signed_v<C>, std::int32_t, std::uint32_t>;
    using W = std::conditional_t<(sizeof(C) <= 4), Wide32, C>;
    return static_cast<C>(static_cast<W>(x) / static_cast<W>(n));
  } else {
    return E::store(E::load(x) / static_cast<C>(n));
  }
}

/// The factor a scale kernel multiplies by: the integer type itself for integers
/// (detail::integer_factor), double for fp64, the scalar rounded (nearest even) to float for the
/// other floating types.
template <typename E>
using FactorType =
    std::conditional_t<std::is_integral_v<typename E::C> || std::is_same_v<typename E::C, double>,
                       typename E::C, float>;

template <typename E>
LOOM_HD constexpr FactorType<E> to_factor(double scalar) noexcept {
  if constexpr (std::is_integral_v<typename E::C>) {
    return detail::integer_factor<typename E::C>(scalar);
  } else {
    return static_cast<FactorType<E>>(scalar);  // nearest even
  }
}

/// x * f in the storage type, as kernels::scale computes it: integers wrap (as Prod); one IEEE
/// multiplication for fp32/fp64; fp16/bf16/fp8 through the exact product rounded to odd in fp32
/// (premul.hpp), then the store's nearest-even rounding.
template <typename E>
LOOM_HD constexpr typename E::S scale_one(typename E::S x, FactorType<E> f) noexcept {
  if constexpr (std::is_integral_v<typename E::C>) {
    return ProdOp::apply(x, f);
  } else if constexpr (std::is_same_v<typename E::S, typename E::C>) {
    return static_cast<typename E::S>(x * f);
  } else {
    return E::store(detail::mul_round_to_odd(E::load(x), f));
  }
}

// ---- 16-byte vectors. ----

/// One 16-byte vector of storage elements.
template <typename S>
struct alignas(kVectorBytes) Pack {
  static constexpr std::size_t kN = kVectorBytes / sizeof(S);
  S v[kN];
};

template <typename E, typename Op>
LOOM_HD constexpr Pack<typename E::S> reduce_pack(const Pack<typename E::S>& a,
                                                  const Pack<typename E::S>& b) noexcept {
  Pack<typename E::S> d{};
  for (std::size_t i = 0; i < Pack<typename E::S>::kN; ++i) d.v[i] = combine<E, Op>(a.v[i], b.v[i]);
  return d;
}

template <typename E>
LOOM_HD constexpr Pack<typename E::S> divide_pack(const Pack<typename E::S>& x, int n) noexcept {
  Pack<typename E::S> d{};
  for (std::size_t i = 0; i < Pack<typename E::S>::kN; ++i) d.v[i] = divide<E>(x.v[i], n);
  return d;
}

template <typename E>
LOOM_HD constexpr Pack<typename E::S> scale_pack(const Pack<typename E::S>& x,
                                                 FactorType<E> f) noexcept {
  Pack<typename E::S> d{};
  for (std::size_t i = 0; i < Pack<typename E::S>::kN; ++i) d.v[i] = scale_one<E>(x.v[i], f);
  return d;
}

// ---- Index arithmetic. ----

/// How [0, count) is covered: scalar elements [0, head), `nvec` whole 16-byte vectors from
/// element `head`, scalar elements [tail_begin, count). When the buffers do not share one
/// alignment modulo 16 bytes, everything is scalar (head == tail_begin == 0, nvec == 0).
struct Split {
  std::size_t head = 0;
  std::size_t nvec = 0;
  std::size_t tail_begin = 0;
  std::size_t count = 0;

  [[nodiscard]] LOOM_HD constexpr std::size_t scalars() const noexcept {
    return head + (count - tail_begin);
  }
  /// The element index of scalar number k (k < scalars()).
  [[nodiscard]] LOOM_HD constexpr std::size_t scalar_index(std::size_t k) const noexcept {
    return k < head ? k : tail_begin + (k - head);
  }
};

/// Splits `count` elements of `elem` bytes at addresses d, a, b (a, b may equal d).
LOOM_HD constexpr Split split_for_vectors(std::uintptr_t d, std::uintptr_t a, std::uintptr_t b,
                                          std::size_t count, std::size_t elem) noexcept {
  Split s;
  s.count = count;
  const std::uintptr_t mis = d % kVectorBytes;
  if (mis != a % kVectorBytes || mis != b % kVectorBytes || mis % elem != 0) return s;
  const std::size_t to_boundary = ((kVectorBytes - mis) % kVectorBytes) / elem;
  s.head = to_boundary < count ? to_boundary : count;
  const std::size_t per_vec = kVectorBytes / elem;
  s.nvec = (count - s.head) / per_vec;
  s.tail_begin = s.head + s.nvec * per_vec;
  return s;
}

/// Launch shape: at most `blocks_per_sm` resident blocks per SM (grid-stride loops cover the
/// rest), never more blocks than there is work, at least one.
struct GridShape {
  unsigned blocks = 1;
  unsigned threads = 256;
};

LOOM_HD constexpr GridShape grid_for(std::size_t work_items, int sm_count, unsigned threads = 256,
                                     unsigned blocks_per_sm = 8) noexcept {
  GridShape g;
  g.threads = threads;
  const std::size_t needed = (work_items + threads - 1) / threads;
  const std::size_t cap = static_cast<std::size_t>(sm_count > 0 ? sm_count : 1) * blocks_per_sm;
  const std::size_t blocks = needed < cap ? needed : cap;
  g.blocks = static_cast<unsigned>(blocks > 0 ? blocks : 1);
  return g;
}

/// Work items of one launch: vectors and scalars are handed out by the same grid-stride index.
LOOM_HD constexpr std::size_t work_items(const Split& s) noexcept {
  return s.nvec > s.scalars() ? s.nvec : s.scalars();
}

// ---- Per-thread loops (the whole body of a kernel). ----

/// Memory access policy for host emulation: 16-byte vectors through memcpy. The device policy
/// (reduce_kernels.cu) uses CUB's streaming 16-byte loads and stores.
struct HostMemory {
  template <typename S>
  static Pack<S> load(const S* p) noexcept {
    Pack<S> v{};
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  template <typename S>
  static void store(S* p, const Pack<S>& v) noexcept {
    std::memcpy(p, &v, sizeof v);
  }
};

/// d[i] = a[i] OP b[i] for the elements of thread `tid` of `nthreads`. d may be exactly a or b.
template <typename E, typename Op, typename Mem>
LOOM_HD void reduce_thread(typename E::S* d, const typename E::S* a, const typename E::S* b,
                           const Split& s, std::size_t tid, std::size_t nthreads) {
  using S = typename E::S;
  constexpr std::size_t kN = Pack<S>::kN;
  for (std::size_t v = tid; v < s.nvec; v += nthreads) {
    const std::size_t i = s.head + v * kN;
    Mem::store(d + i, reduce_pack<E, Op>(Mem::load(a + i), Mem::load(b + i)));
  }
  const std::size_t nscalar = s.scalars();
  for (std::size_t k = tid; k < nscalar; k += nthreads) {
    const std::size_t i = s.scalar_index(k);
    d[i] = combine<E, Op>(a[i], b[i]);
  }
}

/// x[i] = x[i] / n for the elements of thread `tid` of `nthreads`.
template <typename E, typename Mem>
LOOM_HD void divide_thread(typename E::S* x, int n, const Split& s, std::size_t tid,
                           std::size_t nthreads) {
  using S = typename E::S;
  constexpr std::size_t kN = Pack<S>::kN;
  for (std::size_t v = tid; v < s.nvec; v += nthreads) {
    const std::size_t i = s.head + v * kN;
    Mem::store(x + i, divide_pack<E>(Mem::load(x + i), n));
  }
  const std::size_t nscalar = s.scalars();
  for (std::size_t k = tid; k < nscalar; k += nthreads) {
    const std::size_t i = s.scalar_index(k);
    x[i] = divide<E>(x[i], n);
  }
}

/// d[i] = x[i] * f for the elements of thread `tid` of `nthreads` (the split of d and x). d may
/// be exactly x.
template <typename E, typename Mem>
LOOM_HD void scale_thread(typename E::S* d, const typename E::S* x, FactorType<E> f, const Split& s,
                          std::size_t tid, std::size_t nthreads) {
  using S = typename E::S;
  constexpr std::size_t kN = Pack<S>::kN;
  for (std::size_t v = tid; v < s.nvec; v += nthreads) {
    const std::size_t i = s.head + v * kN;
    Mem::store(d + i, scale_pack<E>(Mem::load(x + i), f));
  }
  const std::size_t nscalar = s.scalars();
  for (std::size_t k = tid; k < nscalar; k += nthreads) {
    const std::size_t i = s.scalar_index(k);
    d[i] = scale_one<E>(x[i], f);
  }
}

}  // namespace loom::kernels::cuda
