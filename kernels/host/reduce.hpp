// Host reduction kernels: every DataType x RedOp, written for the compiler to vectorise.
#pragma once

#include <cstddef>
#include <cstdint>

#include "loom/types.hpp"

namespace loom::kernels {

/// dst[i] = a[i] OP b[i] for i < count. `dst` may be exactly `a` or `b` (no partial overlap).
/// Integer arithmetic wraps (two's complement); fp16/bf16/fp8 compute in fp32 and round to nearest
/// even (fp8 e4m3 saturates to +-448, see fp8.hpp); min/max of floats follow std::fmin/fmax
/// semantics on NaN-free data. RedOp::Avg reduces as Sum here: call finalize_avg once on the final
/// result. RedOp::PreMulSum reduces as Sum too: each rank scales its own input first (scale()).
/// BitAnd/BitOr/BitXor combine the integer types' bit patterns. A pair that supports(dtype, op)
/// refuses (a bitwise op on a floating type) or a value outside the enums does nothing: callers
/// validate arguments at the API boundary.
void reduce(DataType dtype, RedOp op, void* dst, const void* a, const void* b, std::size_t count);

/// dst[i] = src[i] * scalar for i < count, the local step of RedOp::PreMulSum; `dst` may be
/// exactly `src` (no partial overlap). Integer types: the scalar is truncated toward zero and
/// clamped to the type's range (NaN: 0), the product wraps (two's complement), as Prod. Floating
/// types: each result is the exact product rounded once to `dtype`, nearest even, where the scalar
/// is first rounded (nearest even) to fp32 for fp32, fp16, bf16 and fp8, and used as is for fp64:
/// fp32 multiplies in fp32 (as NCCL and torch apply the scalar: in the element type), fp64 in
/// fp64, and fp16/bf16/fp8 as fp32 values, their products formed exactly and rounded straight to
/// the type (fp8 e4m3 saturates to +-448, e5m2 and fp16 overflow to infinity, NaN stays NaN).
/// Invalid values do nothing.
void scale(DataType dtype, void* dst, const void* src, std::size_t count, double scalar);

/// In place: x[i] = x[i] / n. Integers: truncating division. fp16/bf16/fp8/fp32: computed in fp32,
/// rounded to nearest even. fp64: in fp64.
void finalize_avg(DataType dtype, void* data, std::size_t count, int n);

/// Fused n-source reduction: dst[i] = ((srcs[0][i] OP srcs[1][i]) OP srcs[2][i]) ... OP
/// srcs[nsrc-1][i], always in this left-to-right order, each intermediate rounded to `dtype`
/// exactly as repeated reduce() calls would (bit-identical to them, except for the payload/sign of
/// a NaN produced by Sum/Prod of two NaNs, which IEEE 754 leaves unspecified). `dst` may be
/// exactly one (or more) of the sources. nsrc == 1 copies; nsrc <= 0 does nothing.
void reduce_n(DataType dtype, RedOp op, void* dst, const void* const* srcs, int nsrc,
              std::size_t count);

/// Scalar conversions with round-to-nearest-even (NaN stays NaN, overflow goes to infinity).
float half_to_float(std::uint16_t h) noexcept;
std::uint16_t float_to_half(float f) noexcept;
float bfloat16_to_float(std::uint16_t b) noexcept;
std::uint16_t float_to_bfloat16(float f) noexcept;
/// FP8 conversions (kernels/host/fp8.hpp): exact decode (NaN quiet); encode rounds to nearest
/// even, e4m3 saturating to +-448 (NaN -> S.1111.111), e5m2 overflowing to infinity.
float fp8_e4m3_to_float(std::uint8_t b) noexcept;
std::uint8_t float_to_fp8_e4m3(float f) noexcept;
float fp8_e5m2_to_float(std::uint8_t b) noexcept;
std::uint8_t float_to_fp8_e5m2(float f) noexcept;

}  // namespace loom::kernels
