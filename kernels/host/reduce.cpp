// Host reduction kernels. Structure: one switch on (dtype, op) per call selects a template
// instantiation whose inner loop is a plain indexed loop over __restrict pointers, with the
// element load/store ("codec") and the operator inlined, so g++ -O3 vectorises every combination.
//
// Semantics, per element:
//  * Integers: Sum/Prod are computed in the unsigned type of the same width, so overflow wraps
//    (two's complement) without UB. Min/Max compare in the declared (signed/unsigned) type.
//  * fp16/bf16: both inputs widen exactly to fp32, the op runs in fp32, the result is rounded back
//    to nearest even. (fp32 holds >= 2p+2 bits of a 16-bit format, so this equals the correctly
//    rounded 16-bit result for Sum/Prod.)
//  * fp8 (e4m3/e5m2): the same, through fp32 (exact for Sum/Prod of two fp8 values, see
//    fp8.hpp); rounding to nearest even; e4m3 saturates to +-448, e5m2 overflows to infinity.
//  * fp32/fp64: native arithmetic.
//  * Min/Max on floating types: equal to std::min(a, b) / std::max(a, b) on NaN-free data (so
//    min(+0, -0) returns a). NaN PROPAGATES: if exactly one input is NaN the result is that NaN;
//    if both are NaN the result is a's NaN. (This deliberately differs from fmin/fmax, which
//    would silently drop a NaN produced by one rank.)
//  * Sum/Prod with NaN inputs give a quiet NaN; when BOTH inputs are NaN, which payload/sign
//    survives is left to the instruction's operand order (IEEE 754 leaves it unspecified).
//  * Avg reduces as Sum; finalize_avg divides once at the end. PreMulSum reduces as Sum too: the
//    scaling of each rank's input (scale()) happens before.
//  * BitAnd/BitOr/BitXor: integer types only, on the bit patterns. A (dtype, op) pair that
//    loom::supports() refuses is never instantiated: reduce() does nothing for it.
//  * scale (PreMulSum's local step): integers multiply in their type (wrapping), floats with one
//    rounding per element; see reduce.hpp.
#include "kernels/host/reduce.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <type_traits>

#include "kernels/host/f16c.hpp"
#include "kernels/host/fp8.hpp"
#include "kernels/host/half.hpp"
#include "kernels/host/premul.hpp"

// Hot loops are compiled twice, for AVX2-class CPUs (x86-64-v3) and for the baseline, and picked
// at load time through an ifunc; other compilers/targets get one portable version. fp16 on CPUs
// with F16C uses the hardware conversions instead (f16c.cpp). Define LOOM_KERNELS_PORTABLE_ONLY
// to build only the portable baseline code (e.g. to test it on an AVX2 host). Every call inside a
// hot loop is inlined (flatten): g++ kept the fp8 conversions out of line, a call per element
// that stopped the loops vectorising (fp8 sums ran at 0.14 G elements/s, bf16 at 3.9).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__ELF__) && \
    !defined(LOOM_KERNELS_PORTABLE_ONLY)
#define LOOM_HOT_LOOP __attribute__((target_clones("arch=x86-64-v3", "default"), flatten))
#elif defined(__GNUC__)
#define LOOM_HOT_LOOP __attribute__((flatten))
#else
#define LOOM_HOT_LOOP
#endif

namespace loom::kernels {
namespace {

// ---- Element codecs: storage type S, compute type C, exact load, rounding store. ----
// The 16-bit loads do not quiet signalling NaNs (cheaper): every result goes back through the
// store, which quiets NaNs, so results are as if the inputs had been quieted on load.

template <typename T>
struct NativeCodec {
  using S = T;
  using C = T;
  static constexpr C load(S v) noexcept { return v; }
  static constexpr S store(C v) noexcept { return v; }
};

struct HalfCodec {
  using S = std::uint16_t;
  using C = float;
  static constexpr C load(S v) noexcept { return detail::half_bits_widen(v); }
  static constexpr S store(C v) noexcept { return detail::float_to_half_bits(v); }
};

struct BFloat16Codec {
  using S = std::uint16_t;
  using C = float;
  static constexpr C load(S v) noexcept { return detail::bf16_bits_widen(v); }
  static constexpr S store(C v) noexcept { return detail::float_to_bf16_bits(v); }
};

struct Fp8E4M3Codec {
  using S = std::uint8_t;
  using C = float;
  static constexpr C load(S v) noexcept { return detail::fp8_e4m3_bits_to_float(v); }
  static constexpr S store(C v) noexcept { return detail::float_to_fp8_e4m3_bits(v); }
};

struct Fp8E5M2Codec {
  using S = std::uint8_t;
  using C = float;
  static constexpr C load(S v) noexcept { return detail::fp8_e5m2_bits_widen(v); }
  static constexpr S store(C v) noexcept { return detail::float_to_fp8_e5m2_bits(v); }
};

// ---- Operators (on the compute type). ----

/// The type an op is evaluated in: the unsigned twin for integers (wrapping), T for floats.
template <typename T>
struct Wrap {
  using type = T;
};
template <typename T>
requires std::is_integral_v<T>
struct Wrap<T> {
  using type = std::make_unsigned_t<T>;
};
template <typename T>
using WrapType = typename Wrap<T>::type;

/// What every operator states: which RedOp it is and whether it is bitwise (integers only).
template <RedOp Op, bool Bitwise = false>
struct OpTag {
  static constexpr RedOp kOp = Op;
  static constexpr bool kBitwise = Bitwise;
};

struct SumOp : OpTag<RedOp::Sum> {
  template <typename T>
  static constexpr T apply(T a, T b) noexcept {
    using U = WrapType<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  }
};

struct ProdOp : OpTag<RedOp::Prod> {
  template <typename T>
  static constexpr T apply(T a, T b) noexcept {
    using U = WrapType<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  }
};

/// NaN test that the compiler can vectorise (always false for integers).
template <typename T>
constexpr bool is_nan(T v) noexcept {
  if constexpr (std::is_floating_point_v<T>) {
    return v != v;
  } else {
    return false;
  }
}

// Written as "keep a unless ..." so that on NaN-free data min == std::min(a, b) ((b < a) ? b : a)
// and max == std::max(a, b) ((a < b) ? b : a), and a NaN operand wins (a's if both are NaN).
// Non-short-circuit `|` keeps the select branch-free.
struct MinOp : OpTag<RedOp::Min> {
  template <typename T>
  static constexpr T apply(T a, T b) noexcept {
    return ((a <= b) | is_nan(a)) ? a : b;
  }
};

struct MaxOp : OpTag<RedOp::Max> {
  template <typename T>
  static constexpr T apply(T a, T b) noexcept {
    return ((b <= a) | is_nan(a)) ? a : b;
  }
};

// Bitwise ops: defined for the integer types only (never instantiated for the others).
template <RedOp Op, typename F>
struct BitwiseOp : OpTag<Op, true> {
  template <typename T>
  requires std::is_integral_v<T>
  static constexpr T apply(T a, T b) noexcept { return static_cast<T>(F{}(a, b)); }
};
using BitAndOp = BitwiseOp<RedOp::BitAnd, std::bit_and<>>;
using BitOrOp = BitwiseOp<RedOp::BitOr, std::bit_or<>>;
using BitXorOp = BitwiseOp<RedOp::BitXor, std::bit_xor<>>;

template <typename E, typename Op>
constexpr typename E::S combine(typename E::S a, typename E::S b) noexcept {
  return E::store(Op::template apply<typename E::C>(E::load(a), E::load(b)));
}

// ---- Hot loops. ----

/// d[i] = a[i] op b[i]; d must not overlap a or b (a == b is fine: both are only read).
template <typename E, typename Op>
LOOM_HOT_LOOP void loop_out(typename E::S* __restrict d, const typename E::S* __restrict a,
                            const typename E::S* __restrict b, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) d[i] = combine<E, Op>(a[i], b[i]);
}

/// In place: x[i] = x[i] op y[i] (kAccFirst) or x[i] = y[i] op x[i]; x and y must not overlap.
template <typename E, typename Op, bool kAccFirst>
LOOM_HOT_LOOP void loop_inout(typename E::S* __restrict x, const typename E::S* __restrict y,
                              std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = kAccFirst ? combine<E, Op>(x[i], y[i]) : combine<E, Op>(y[i], x[i]);
  }
}

/// x[i] = x[i] / n (n >= 1): integers truncate, floats divide in the compute type and round.
template <typename E>
LOOM_HOT_LOOP void loop_div(typename E::S* __restrict x, std::size_t count, int n) {
  using C = typename E::C;
  if constexpr (std::is_integral_v<C>) {
    // Divide in (at least) 32 bits of the same signedness: the quotient always fits back in C.
    using Wide32 = std::conditional_t<std::is_signed_v<C>, std::int32_t, std::uint32_t>;
    using W = std::conditional_t<(sizeof(C) <= 4), Wide32, C>;
    const W div = static_cast<W>(n);
    for (std::size_t i = 0; i < count; ++i) x[i] = static_cast<C>(static_cast<W>(x[i]) / div);
  } else {
    const C div = static_cast<C>(n);
    for (std::size_t i = 0; i < count; ++i) x[i] = E::store(E::load(x[i]) / div);
  }
}

// ---- Scaling (PreMulSum's local step). ----

/// The factor as the multiplication uses it: the integer type itself for integers (see
/// detail::integer_factor), double for fp64, the scalar rounded to float for the other floats.
template <typename E>
using FactorType =
    std::conditional_t<std::is_integral_v<typename E::C> || std::is_same_v<typename E::C, double>,
                       typename E::C, float>;

template <typename E>
constexpr FactorType<E> to_factor(double scalar) noexcept {
  if constexpr (std::is_integral_v<typename E::C>) {
    return detail::integer_factor<typename E::C>(scalar);
  } else {
    return static_cast<FactorType<E>>(scalar);  // nearest even
  }
}

/// x * f in the storage type: integers wrap (as Prod); fp32/fp64 with one IEEE multiplication;
/// fp16/bf16/fp8 through the exact product rounded to odd (premul.hpp), then the store's
/// nearest-even rounding: together one correct rounding.
template <typename E>
constexpr typename E::S scale_one(typename E::S x, FactorType<E> f) noexcept {
  if constexpr (std::is_integral_v<typename E::C>) {
    return ProdOp::apply(x, f);
  } else if constexpr (std::is_same_v<typename E::S, typename E::C>) {
    return static_cast<typename E::S>(x * f);
  } else {
    return E::store(detail::mul_round_to_odd(E::load(x), f));
  }
}

template <typename E>
LOOM_HOT_LOOP void loop_scale_out(typename E::S* __restrict d, const typename E::S* __restrict s,
                                  std::size_t n, FactorType<E> f) {
  for (std::size_t i = 0; i < n; ++i) d[i] = scale_one<E>(s[i], f);
}

template <typename E>
LOOM_HOT_LOOP void loop_scale_in(typename E::S* __restrict x, std::size_t n, FactorType<E> f) {
  for (std::size_t i = 0; i < n; ++i) x[i] = scale_one<E>(x[i], f);
}

// ---- Typed drivers. ----

template <typename E, typename Op>
void reduce_typed(void* dst, const void* a, const void* b, std::size_t count) {
  using S = typename E::S;
  auto* d = static_cast<S*>(dst);
  const auto* pa = static_cast<const S*>(a);
  const auto* pb = static_cast<const S*>(b);
#ifdef LOOM_KERNELS_HAVE_F16C
  if constexpr (std::is_same_v<E, HalfCodec>) {
    if (detail::cpu_has_f16c()) {
      detail::f16c_reduce(Op::kOp, d, pa, pb, count);  // any exact aliasing is fine there
      return;
    }
  }
#endif
  if (d != pa && d != pb) {
    loop_out<E, Op>(d, pa, pb, count);
  } else if (d != pb) {
    loop_inout<E, Op, true>(d, pb, count);
  } else if (d != pa) {
    loop_inout<E, Op, false>(d, pa, count);
  } else {
    // dst == a == b (rare): stage the operand through a stack buffer to keep __restrict honest.
    constexpr std::size_t kChunk = 4096 / sizeof(S);
    S tmp[kChunk];
    for (std::size_t base = 0; base < count; base += kChunk) {
      const std::size_t m = std::min(kChunk, count - base);
      std::memcpy(tmp, d + base, m * sizeof(S));
      loop_inout<E, Op, true>(d + base, tmp, m);
    }
  }
}

/// Tiled left-to-right fold: for each tile, acc = s0 op s1, then acc = acc op sk for k = 2..n-1,
/// then the tile is copied to dst (acc stays in L1). Each step is the very same call as reduce(),
/// so results match repeated reduce() bit for bit; every source tile is read before the dst tile is
/// written, so dst may be any of the sources.
template <typename E, typename Op>
void reduce_n_typed(void* dst, const void* const* srcs, int nsrc, std::size_t count) {
  using S = typename E::S;
  constexpr std::size_t kTile = 4096 / sizeof(S);
  alignas(64) S acc[kTile];
  auto* d = static_cast<S*>(dst);
  for (std::size_t base = 0; base < count; base += kTile) {
    const std::size_t m = std::min(kTile, count - base);
    const auto* s0 = static_cast<const S*>(srcs[0]) + base;
    const auto* s1 = static_cast<const S*>(srcs[1]) + base;
    reduce_typed<E, Op>(acc, s0, s1, m);
    for (int k = 2; k < nsrc; ++k) {
      reduce_typed<E, Op>(acc, acc, static_cast<const S*>(srcs[k]) + base, m);
    }
    std::memcpy(d + base, acc, m * sizeof(S));
  }
}

// ---- Dispatch: exactly one switch on dtype and one on op per call. ----

template <typename T>
struct Tag {
  using type = T;
};

/// Calls f(Tag<Codec>{}) for the codec of `t`; returns false for an invalid dtype.
template <typename F>
bool visit_dtype(DataType t, F&& f) {
  switch (t) {
    case DataType::Int8: f(Tag<NativeCodec<std::int8_t>>{}); return true;
    case DataType::Uint8: f(Tag<NativeCodec<std::uint8_t>>{}); return true;
    case DataType::Int32: f(Tag<NativeCodec<std::int32_t>>{}); return true;
    case DataType::Uint32: f(Tag<NativeCodec<std::uint32_t>>{}); return true;
    case DataType::Int64: f(Tag<NativeCodec<std::int64_t>>{}); return true;
    case DataType::Uint64: f(Tag<NativeCodec<std::uint64_t>>{}); return true;
    case DataType::Float16: f(Tag<HalfCodec>{}); return true;
    case DataType::BFloat16: f(Tag<BFloat16Codec>{}); return true;
    case DataType::Float32: f(Tag<NativeCodec<float>>{}); return true;
    case DataType::Float64: f(Tag<NativeCodec<double>>{}); return true;
    case DataType::Float8E4M3: f(Tag<Fp8E4M3Codec>{}); return true;
    case DataType::Float8E5M2: f(Tag<Fp8E5M2Codec>{}); return true;
  }
  return false;
}

/// Calls f(Tag<Op>{}) for `op` (Avg, PreMulSum -> Sum); returns false for an invalid op.
template <typename F>
bool visit_op(RedOp op, F&& f) {
  switch (op) {
    case RedOp::Sum:
    case RedOp::Avg:
    case RedOp::PreMulSum: f(Tag<SumOp>{}); return true;
    case RedOp::Prod: f(Tag<ProdOp>{}); return true;
    case RedOp::Min: f(Tag<MinOp>{}); return true;
    case RedOp::Max: f(Tag<MaxOp>{}); return true;
    case RedOp::BitAnd: f(Tag<BitAndOp>{}); return true;
    case RedOp::BitOr: f(Tag<BitOrOp>{}); return true;
    case RedOp::BitXor: f(Tag<BitXorOp>{}); return true;
  }
  return false;
}

/// Calls f(Tag<Codec>{}, Tag<Op>{}) for a pair loom::supports(); nothing for the others.
template <typename F>
void visit(DataType dtype, RedOp op, F&& f) {
  if (!supports(dtype, op)) return;
  visit_dtype(dtype, [&](auto codec) {
    visit_op(op, [&](auto oper) {
      using E = typename decltype(codec)::type;
      using Op = typename decltype(oper)::type;
      if constexpr (!Op::kBitwise || std::is_integral_v<typename E::C>) f(codec, oper);
    });
  });
}

}  // namespace

// Invalid dtype/op values are ignored (callers validate arguments at the API boundary).

void reduce(DataType dtype, RedOp op, void* dst, const void* a, const void* b, std::size_t count) {
  if (count == 0) return;
  visit(dtype, op, [&](auto codec, auto oper) {
    reduce_typed<typename decltype(codec)::type, typename decltype(oper)::type>(dst, a, b, count);
  });
}

void reduce_n(DataType dtype, RedOp op, void* dst, const void* const* srcs, int nsrc,
              std::size_t count) {
  if (count == 0 || nsrc <= 0 || !supports(dtype, op)) return;
  if (nsrc == 1) {
    if (dst != srcs[0]) std::memmove(dst, srcs[0], count * dtype_size(dtype));
    return;
  }
  visit(dtype, op, [&](auto codec, auto oper) {
    using E = typename decltype(codec)::type;
    reduce_n_typed<E, typename decltype(oper)::type>(dst, srcs, nsrc, count);
  });
}

void finalize_avg(DataType dtype, void* data, std::size_t count, int n) {
  if (count == 0 || n < 1) return;
  visit_dtype(dtype, [&](auto codec) {
    using E = typename decltype(codec)::type;
#ifdef LOOM_KERNELS_HAVE_F16C
    if constexpr (std::is_same_v<E, HalfCodec>) {
      if (detail::cpu_has_f16c()) {
        detail::f16c_divide(static_cast<std::uint16_t*>(data), count, n);
        return;
      }
    }
#endif
    loop_div<E>(static_cast<typename E::S*>(data), count, n);
  });
}

void scale(DataType dtype, void* dst, const void* src, std::size_t count, double scalar) {
  if (count == 0 || !supports(dtype, RedOp::PreMulSum)) return;
  visit_dtype(dtype, [&](auto codec) {
    using E = typename decltype(codec)::type;
    using S = typename E::S;
    const FactorType<E> f = to_factor<E>(scalar);
    if (dst == src) {
      loop_scale_in<E>(static_cast<S*>(dst), count, f);
    } else {
      loop_scale_out<E>(static_cast<S*>(dst), static_cast<const S*>(src), count, f);
    }
  });
}

float half_to_float(std::uint16_t h) noexcept {
  return detail::half_bits_to_float(h);
}
std::uint16_t float_to_half(float f) noexcept {
  return detail::float_to_half_bits(f);
}
float bfloat16_to_float(std::uint16_t b) noexcept {
  return detail::bf16_bits_to_float(b);
}
std::uint16_t float_to_bfloat16(float f) noexcept {
  return detail::float_to_bf16_bits(f);
}
float fp8_e4m3_to_float(std::uint8_t b) noexcept {
  return detail::fp8_e4m3_bits_to_float(b);
}
std::uint8_t float_to_fp8_e4m3(float f) noexcept {
  return detail::float_to_fp8_e4m3_bits(f);
}
float fp8_e5m2_to_float(std::uint8_t b) noexcept {
  return detail::fp8_e5m2_bits_to_float(b);
}
std::uint8_t float_to_fp8_e5m2(float f) noexcept {
  return detail::float_to_fp8_e5m2_bits(f);
}

}  // namespace loom::kernels
