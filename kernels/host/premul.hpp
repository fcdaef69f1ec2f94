// PreMulSum's local step, one element at a time: the factor each dtype multiplies by and the
// rounding of the product. Shared by the host kernels (reduce.cpp) and the CUDA kernels
// (kernels/cuda/reduce_logic.hpp), so both compute the same bits. Pure constexpr arithmetic.
#pragma once

#include <bit>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace loom::kernels::detail {

/// The factor an integer input of type T is multiplied by: the scalar truncated toward zero and
/// clamped to T's range (NaN gives 0), as NCCL converts it (there with undefined behaviour out of
/// range). The product is then formed in T, wrapping like the other integer ops.
template <typename T>
requires std::is_integral_v<T>
constexpr T integer_factor(double s) noexcept {
  using L = std::numeric_limits<T>;
  constexpr double kLow = static_cast<double>(L::min());  // 0 or -2^(digits): exact
  constexpr double kHigh = static_cast<double>(std::uint64_t{1} << (L::digits - 1)) * 2.0;  // 2^d
  if (!(s == s)) return 0;                                                                  // NaN
  if (s <= kLow) return L::min();
  if (s >= kHigh) return L::max();
  return static_cast<T>(s);  // in range: truncates toward zero
}

/// The product x * s rounded to binary32 with round-to-odd (truncate, then set the last bit if
/// anything was cut off; magnitudes beyond FLT_MAX give FLT_MAX, odd). The product is formed
/// exactly in binary64, which holds it whenever x has at most 29 significant bits (every fp16,
/// bf16 and fp8 value). Rounding that result once more, to nearest even, into any format with at
/// least 2 fewer significant bits and a coarser subnormal step (fp16, bf16, fp8) gives the
/// correctly rounded product: x * s in that format with a single rounding. (Rounding to nearest
/// in fp32 first would round twice: a product just above a midpoint of the narrow format could
/// land exactly on it and then tie to even, the wrong way.)
constexpr float mul_round_to_odd(float x, float s) noexcept {
  constexpr double kMax = 0x1.fffffep127;  // FLT_MAX
  double p = static_cast<double>(x) * static_cast<double>(s);
  p = p > kMax ? kMax : p < -kMax ? -kMax : p;  // no out-of-range conversion (NaN passes)
  const float r = static_cast<float>(p);        // nearest even
  const double back = static_cast<double>(r);
  // Rounded away from zero: step back one ulp towards it (the magnitude's bits minus one).
  const std::uint32_t away = static_cast<std::uint32_t>((p > 0) & (back > p)) |
                             static_cast<std::uint32_t>((p < 0) & (back < p));
  const std::uint32_t inexact = static_cast<std::uint32_t>(!(back == p));  // NaN too: stays NaN
  return std::bit_cast<float>((std::bit_cast<std::uint32_t>(r) - away) | inexact);
}

}  // namespace loom::kernels::detail
