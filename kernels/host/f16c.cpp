// fp16 kernels on F16C; see f16c.hpp. Every function that uses AVX/F16C instructions carries the
// target attribute, so this file builds without -mavx and the code only runs after
// cpu_has_f16c() said yes.
#include "kernels/host/f16c.hpp"

#ifdef LOOM_KERNELS_HAVE_F16C

#include <cpuid.h>
#include <immintrin.h>

#include <cstring>

#define LOOM_F16C_TARGET __attribute__((target("avx,f16c")))

namespace loom::kernels::detail {
namespace {

// The same element semantics as the portable ops in reduce.cpp, eight lanes at a time:
// min keeps a when (a <= b) or a is NaN, max keeps a when (b <= a) or a is NaN. min/max start
// from the hardware's (which returns its second operand, a, unless the first is strictly
// smaller/larger: that covers a NaN a) and take b where b alone is NaN. (g++ 12 turned the
// blendv of a compare mask used before into a branch per lane, 7x slower than sum.)
struct VecSum {
  LOOM_F16C_TARGET static __m256 apply(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
};
struct VecProd {
  LOOM_F16C_TARGET static __m256 apply(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
};
// b where b alone is NaN, else r.
LOOM_F16C_TARGET inline __m256 nan_b_or(__m256 r, __m256 a, __m256 b) {
  const __m256 b_only_nan =
      _mm256_andnot_ps(_mm256_cmp_ps(a, a, _CMP_UNORD_Q), _mm256_cmp_ps(b, b, _CMP_UNORD_Q));
  return _mm256_or_ps(_mm256_and_ps(b_only_nan, b), _mm256_andnot_ps(b_only_nan, r));
}
struct VecMin {
  LOOM_F16C_TARGET static __m256 apply(__m256 a, __m256 b) {
    return nan_b_or(_mm256_min_ps(b, a), a, b);
  }
};
struct VecMax {
  LOOM_F16C_TARGET static __m256 apply(__m256 a, __m256 b) {
    return nan_b_or(_mm256_max_ps(b, a), a, b);
  }
};

LOOM_F16C_TARGET inline __m256 load8(const std::uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
LOOM_F16C_TARGET inline void store8(std::uint16_t* p, __m256 v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

/// Both operands of a block are loaded before its result is stored, so exact aliasing of dst
/// with a and/or b is fine. The tail goes through an 8-element stack block, which keeps its
/// results bit-identical to the body's.
template <typename Op>
LOOM_F16C_TARGET void reduce_loop(std::uint16_t* d, const std::uint16_t* a, const std::uint16_t* b,
                                  std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) store8(d + i, Op::apply(load8(a + i), load8(b + i)));
  if (i == n) return;
  std::uint16_t ta[8] = {}, tb[8] = {}, td[8];
  const std::size_t rest = n - i;
  std::memcpy(ta, a + i, rest * sizeof(std::uint16_t));
  std::memcpy(tb, b + i, rest * sizeof(std::uint16_t));
  store8(td, Op::apply(load8(ta), load8(tb)));
  std::memcpy(d + i, td, rest * sizeof(std::uint16_t));
}

}  // namespace

namespace {

bool detect_f16c() noexcept {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
  constexpr unsigned kOsXsave = 1u << 27, kAvx = 1u << 28, kF16c = 1u << 29;
  if ((ecx & (kOsXsave | kAvx | kF16c)) != (kOsXsave | kAvx | kF16c)) return false;
  unsigned xcr0_lo = 0, xcr0_hi = 0;  // the OS must save the SSE and AVX register state
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  return (xcr0_lo & 6u) == 6u;
}

}  // namespace

bool cpu_has_f16c() noexcept {
  static const bool kHas = detect_f16c();
  return kHas;
}

void f16c_reduce(RedOp op, std::uint16_t* dst, const std::uint16_t* a, const std::uint16_t* b,
                 std::size_t count) {
  switch (op) {
    case RedOp::Sum:
    case RedOp::Avg:
    case RedOp::PreMulSum: reduce_loop<VecSum>(dst, a, b, count); return;
    case RedOp::Prod: reduce_loop<VecProd>(dst, a, b, count); return;
    case RedOp::Min: reduce_loop<VecMin>(dst, a, b, count); return;
    case RedOp::Max: reduce_loop<VecMax>(dst, a, b, count); return;
    case RedOp::BitAnd:
    case RedOp::BitOr:
    case RedOp::BitXor: return;  // integer types only: never called for fp16
  }
}

LOOM_F16C_TARGET void f16c_divide(std::uint16_t* x, std::size_t count, int n) {
  const __m256 div = _mm256_set1_ps(static_cast<float>(n));
  std::size_t i = 0;
  for (; i + 8 <= count; i += 8) store8(x + i, _mm256_div_ps(load8(x + i), div));
  if (i == count) return;
  std::uint16_t t[8] = {};
  const std::size_t rest = count - i;
  std::memcpy(t, x + i, rest * sizeof(std::uint16_t));
  store8(t, _mm256_div_ps(load8(t), div));
  std::memcpy(x + i, t, rest * sizeof(std::uint16_t));
}

}  // namespace loom::kernels::detail

#endif  // LOOM_KERNELS_HAVE_F16C
