// OCP 8-bit floating point (FP8) <-> binary32 conversions, in the branch-free style of half.hpp
// (integer shifts/masks/compares/selects, one int->float conversion, one float add), so that g++
// can vectorise them and nvcc can run them unchanged on the device (kernels/cuda/reduce_logic.hpp).
//
// Formats (the bit layouts of CUDA's __nv_fp8_e4m3 / __nv_fp8_e5m2):
//  * E4M3 ("E4M3FN"): 1 sign, 4 exponent (bias 7), 3 mantissa bits. No infinity; S.1111.111
//    (0x7f, 0xff) is NaN, so the exponent field 15 holds normal numbers up to 448 = 1.75 * 2^8.
//    Smallest normal 2^-6, smallest subnormal 2^-9.
//  * E5M2: 1 sign, 5 exponent (bias 15), 2 mantissa bits, IEEE-like (the top byte of a binary16):
//    infinities, NaNs (quiet bit = the top mantissa bit), max finite 57344 = 1.75 * 2^15,
//    smallest normal 2^-14, smallest subnormal 2^-16.
//
// Decoding is exact. Encoding rounds to nearest, ties to even, with gradual underflow, and:
//  * E4M3 SATURATES: every non-NaN value of magnitude above 448, infinities included, encodes as
//    +-448 (0x7e / 0xfe), the sign kept. This is CUDA's __NV_SATFINITE conversion (what the
//    __nv_fp8_e4m3(float) constructor does). NaN encodes as S.1111.111 (sign kept).
//  * E5M2 OVERFLOWS TO INFINITY exactly as IEEE round-to-nearest-even (and as loom's fp16):
//    magnitudes >= 61440 (halfway between 57344 and 2^16) become +-inf, infinities stay
//    infinities. (CUDA's __nv_fp8_e5m2(float) constructor saturates instead; loom keeps
//    infinities because e5m2 has them, so an inf from one rank is not turned into a finite.)
//    NaN stays NaN, returned quiet with the sign and the next payload bit kept (as fp16 does).
//
// Like half.hpp, this assumes the default floating-point environment (round to nearest, no
// flush-to-zero): one float add performs the rounding of subnormal results.
#pragma once

#include <bit>
#include <cstdint>

#include "kernels/host/half.hpp"

namespace loom::kernels::detail {

/// E4M3 bits -> binary32 value (exact; NaN is returned as a quiet NaN with the sign kept).
constexpr float fp8_e4m3_bits_to_float(std::uint8_t b) noexcept {
  const std::uint32_t sign = (static_cast<std::uint32_t>(b) & 0x80u) << 24;
  const std::uint32_t mag = b & 0x7fu;  // exponent and mantissa
  // Normal numbers: mantissa into the top 3 mantissa bits, exponent rebiased by 127 - 7 = 120.
  const std::uint32_t normal = (mag << 20) + (120u << 23);
  // Zero and subnormals: mag == mantissa, value = mantissa * 2^-9 (exact in binary32).
  const float tiny = static_cast<float>(static_cast<std::int32_t>(mag)) * 0x1p-9f;
  std::uint32_t out = select_bits(mag < 0x08u, std::bit_cast<std::uint32_t>(tiny), normal);
  out = select_bits(mag == 0x7fu, 0x7fc00000u, out);
  return std::bit_cast<float>(out | sign);
}

/// binary32 value -> E4M3 bits: round to nearest even, saturating to +-448; NaN -> S.1111.111.
constexpr std::uint8_t float_to_fp8_e4m3_bits(float f) noexcept {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (bits >> 24) & 0x80u;
  const std::uint32_t mag = bits & 0x7fffffffu;
  // Normal results (|f| >= 2^-6): rebias by 120, round off the low 20 mantissa bits.
  const std::uint32_t normal = narrow_normal(mag, 120, 20);
  // Subnormal results (|f| < 2^-6): 2^14 has ulp 2^-9, the subnormal step (8 when rounding up
  // to the smallest normal, which is also its encoding).
  const std::uint32_t sub = narrow_subnormal(mag, 0x1p14f);
  std::uint32_t out = select_bits(mag < 0x3c800000u, sub, normal);
  // Above 448 (0x43e00000), infinity included: saturate. (Anything above 448 rounds to >= 448.)
  out = select_bits(mag > 0x43e00000u, 0x7eu, out);
  out = select_bits(mag > 0x7f800000u, 0x7fu, out);  // NaN
  return static_cast<std::uint8_t>(out | sign);
}

/// E5M2 bits -> binary32 value (exact; a signalling NaN stays signalling, as half_bits_widen).
constexpr float fp8_e5m2_bits_widen(std::uint8_t b) noexcept {
  return half_bits_widen(static_cast<std::uint16_t>(static_cast<std::uint16_t>(b) << 8));
}

/// E5M2 bits -> binary32 value (exact; NaN is returned quiet).
constexpr float fp8_e5m2_bits_to_float(std::uint8_t b) noexcept {
  return quiet_nan(fp8_e5m2_bits_widen(b));
}

/// binary32 value -> E5M2 bits: round to nearest even, overflow to infinity, NaN quiet.
constexpr std::uint8_t float_to_fp8_e5m2_bits(float f) noexcept {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (bits >> 24) & 0x80u;
  const std::uint32_t mag = bits & 0x7fffffffu;
  // Normal results (|f| >= 2^-14): rebias by 112, round off the low 21 mantissa bits.
  const std::uint32_t normal = narrow_normal(mag, 112, 21);
  // Subnormal results (|f| < 2^-14): 2^7 has ulp 2^-16, the subnormal step.
  const std::uint32_t sub = narrow_subnormal(mag, 0x1p7f);
  std::uint32_t out = select_bits(mag < 0x38800000u, sub, normal);
  // |f| >= 61440 (halfway between 57344 and 2^16; the tie goes to the even 2^16) is infinity.
  out = select_bits(mag >= 0x47700000u, 0x7cu, out);
  // NaN: quiet, keep the next payload bit.
  out = select_bits(mag > 0x7f800000u, 0x7eu | ((mag >> 21) & 1u), out);
  return static_cast<std::uint8_t>(out | sign);
}

}  // namespace loom::kernels::detail
