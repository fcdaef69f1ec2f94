// Branch-free IEEE binary16 / bfloat16 <-> binary32 conversions, written so that g++ can inline
// them into vectorised loops (only integer shifts/masks/compares/selects, one int->float
// conversion and one float add). All conversions are exact IEEE: round to nearest, ties to even;
// subnormals handled; overflow goes to infinity; NaN stays NaN and is returned quiet (the sign and
// the top payload bits are kept). The public wrappers are in reduce.hpp.
//
// The float arithmetic used here (one exact multiply, one add that performs the rounding of
// subnormal halves) assumes the default floating-point environment: round-to-nearest, no
// flush-to-zero / denormals-are-zero.
#pragma once

#include <bit>
#include <cstdint>

namespace loom::kernels::detail {

/// cond ? x : y as pure data flow. A `?:` lets g++ sink the (possibly trapping, under the default
/// -ftrapping-math) float operations into a branch, after which the loop no longer vectorises.
constexpr std::uint32_t select_bits(bool cond, std::uint32_t x, std::uint32_t y) noexcept {
  const std::uint32_t mask = 0u - static_cast<std::uint32_t>(cond);
  return (x & mask) | (y & ~mask);
}

/// The nearest-even encoding of a normal-range magnitude `mag` (binary32 bits without the sign)
/// in a narrower binary format: the exponent rebiased by `rebias`, the low `drop` mantissa bits
/// rounded off (a carry out of the mantissa increments the exponent, as it should). Wraps
/// harmlessly below the format's normal range, where callers select the subnormal lane.
constexpr std::uint32_t narrow_normal(std::uint32_t mag, std::uint32_t rebias, int drop) noexcept {
  const std::uint32_t round_bias = ((1u << (drop - 1)) - 1u) + ((mag >> drop) & 1u);
  return (mag - (rebias << 23) + round_bias) >> drop;
}

/// The subnormal encoding of a magnitude below a narrower format's normal range: adding `align`,
/// a power of two whose ulp is the format's subnormal step, makes the hardware add round |f| to
/// nearest even on that grid; the low bits are then the mantissa (the smallest normal's
/// encoding when it rounds up to it).
constexpr std::uint32_t narrow_subnormal(std::uint32_t mag, float align) noexcept {
  const float aligned = std::bit_cast<float>(mag) + align;
  return std::bit_cast<std::uint32_t>(aligned) - std::bit_cast<std::uint32_t>(align);
}

/// Sets the quiet bit of a binary32 NaN; other values pass unchanged.
constexpr float quiet_nan(float f) noexcept {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t quiet = (bits & 0x7fffffffu) > 0x7f800000u ? 0x00400000u : 0u;
  return std::bit_cast<float>(bits | quiet);
}

/// binary16 bits -> binary32 value (exact). A signalling NaN stays signalling (the reduction
/// kernels store every result back through float_to_half_bits, which quiets it).
constexpr float half_bits_widen(std::uint16_t h) noexcept {
  const std::uint32_t bits = h;
  const std::uint32_t sign = (bits & 0x8000u) << 16;
  const std::uint32_t mag = bits & 0x7fffu;  // exponent and mantissa
  // Normal numbers: shift into place and rebias the exponent by 127 - 15 = 112.
  const std::uint32_t normal = (mag << 13) + (112u << 23);
  // Inf/NaN (exponent 31): rebias once more to reach exponent 255 (the mantissa is kept).
  const std::uint32_t special = normal + (112u << 23);
  // Zero and subnormals: mag == mantissa, value = mantissa * 2^-24 (exact in binary32).
  const float tiny = static_cast<float>(static_cast<std::int32_t>(mag)) * 0x1p-24f;
  const std::uint32_t sub = std::bit_cast<std::uint32_t>(tiny);
  const std::uint32_t wide = select_bits(mag >= 0x7c00u, special, normal);
  const std::uint32_t out = select_bits(mag < 0x0400u, sub, wide);
  return std::bit_cast<float>(out | sign);
}

/// binary16 bits -> binary32 value (exact; NaN is returned quiet).
constexpr float half_bits_to_float(std::uint16_t h) noexcept {
  return quiet_nan(half_bits_widen(h));
}

/// binary32 value -> binary16 bits, round to nearest even.
constexpr std::uint16_t float_to_half_bits(float f) noexcept {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const std::uint32_t mag = bits & 0x7fffffffu;
  // Normal halves (|f| >= 2^-14): rebias by 112, round off the low 13 mantissa bits.
  const std::uint32_t normal = narrow_normal(mag, 112, 13);
  // Subnormal halves (|f| < 2^-14): 0.5f has ulp 2^-24, the subnormal step (0x400 when rounding
  // up to the smallest normal, which is also the right encoding).
  const std::uint32_t sub = narrow_subnormal(mag, 0.5f);
  std::uint32_t out = select_bits(mag < 0x38800000u, sub, normal);
  // |f| >= 65520 (halfway between 65504, the largest finite half, and 2^16) rounds to infinity.
  out = select_bits(mag >= 0x477ff000u, 0x7c00u, out);
  // NaN: quiet, keep the top 10 payload bits.
  out = select_bits(mag > 0x7f800000u, 0x7e00u | ((mag >> 13) & 0x03ffu), out);
  return static_cast<std::uint16_t>(out | sign);
}

/// bfloat16 bits -> binary32 value (exact; a signalling NaN stays signalling).
constexpr float bf16_bits_widen(std::uint16_t b) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

/// bfloat16 bits -> binary32 value (exact; NaN is returned quiet).
constexpr float bf16_bits_to_float(std::uint16_t b) noexcept {
  return quiet_nan(bf16_bits_widen(b));
}

/// binary32 value -> bfloat16 bits, round to nearest even (overflow rounds to infinity).
constexpr std::uint16_t float_to_bf16_bits(float f) noexcept {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  // Round off the low 16 bits to nearest even; carries propagate into the exponent, so the
  // largest finite values round up to infinity exactly when IEEE says so.
  const std::uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  const std::uint32_t nan = (bits >> 16) | 0x0040u;  // quiet, keep sign and top payload bits
  const bool is_nan = (bits & 0x7fffffffu) > 0x7f800000u;
  return static_cast<std::uint16_t>(is_nan ? nan : rounded);
}

}  // namespace loom::kernels::detail
