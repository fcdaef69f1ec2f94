// Element types and reduction operators of the public API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace loom {

enum class DataType : std::uint8_t {
  Int8 = 0,
  Uint8,
  Int32,
  Uint32,
  Int64,
  Uint64,
  Float16,
  BFloat16,
  Float32,
  Float64,
  Float8E4M3,  // OCP FP8 E4M3 ("fn": no infinity, NaN = S.1111.111), bias 7, max 448
  Float8E5M2,  // OCP FP8 E5M2 (IEEE-like: infinities and NaNs), bias 15, max 57344
};
inline constexpr int kNumDataTypes = 12;

/// Reduction operators. Which ones a DataType supports: see supports(DataType, RedOp) below.
///  * Sum, Prod, Min, Max, Avg: every type. Integers wrap (two's complement); Avg divides the sum
///    once at the end (integers truncate).
///  * PreMulSum (NCCL's ncclRedOpCreatePreMulSum, torch's PREMUL_SUM): every rank multiplies its
///    own input by a scalar given with the call (CollOptions::scalar), then the products are
///    summed. Every type.
///    Floating types: fp64 multiplies in fp64; fp32 by the scalar rounded to fp32 (as NCCL and
///    torch apply it: in the element type); fp16/bf16/fp8 by the scalar rounded to fp32, the
///    product computed exactly and rounded to the type once (nearest even). Integer types: by the
///    scalar truncated toward zero and clamped to the type's range (NaN: 0), the product exact in
///    the type (wrapping, as Prod): give an integral scalar.
///  * BitAnd, BitOr, BitXor: integer types only (on the two's complement bit pattern).
enum class RedOp : std::uint8_t {
  Sum = 0,
  Prod,
  Min,
  Max,
  Avg,
  PreMulSum,
  BitAnd,
  BitOr,
  BitXor,
};
inline constexpr int kNumRedOps = 9;

/// Size of one element in bytes; 0 for a value outside the enum.
constexpr std::size_t dtype_size(DataType t) noexcept {
  switch (t) {
    case DataType::Int8:
    case DataType::Uint8:
    case DataType::Float8E4M3:
    case DataType::Float8E5M2: return 1;
    case DataType::Float16:
    case DataType::BFloat16: return 2;
    case DataType::Int32:
    case DataType::Uint32:
    case DataType::Float32: return 4;
    case DataType::Int64:
    case DataType::Uint64:
    case DataType::Float64: return 8;
  }
  return 0;
}

constexpr bool is_valid(DataType t) noexcept {
  return dtype_size(t) != 0;
}
constexpr bool is_valid(RedOp op) noexcept {
  return static_cast<int>(op) < kNumRedOps;
}
constexpr bool is_floating(DataType t) noexcept {
  return t == DataType::Float16 || t == DataType::BFloat16 || t == DataType::Float32 ||
         t == DataType::Float64 || t == DataType::Float8E4M3 || t == DataType::Float8E5M2;
}

constexpr bool is_integer(DataType t) noexcept {
  return is_valid(t) && !is_floating(t);
}
constexpr bool is_bitwise(RedOp op) noexcept {
  return op == RedOp::BitAnd || op == RedOp::BitOr || op == RedOp::BitXor;
}

/// The one rule for which (DataType, RedOp) pairs loom reduces (every call that reduces refuses
/// the others with InvalidArgument): bitwise ops only for the integer types, the arithmetic ops
/// and PreMulSum for every type. False for values outside the enums.
constexpr bool supports(DataType t, RedOp op) noexcept {
  if (!is_valid(t) || !is_valid(op)) return false;
  if (is_bitwise(op)) return is_integer(t);
  return true;
}

/// nccl-tests style names: "int8", "uint8", "int32", ..., "half", "bfloat16", "float", "double",
/// "f8e4m3", "f8e5m2".
std::string_view to_string(DataType t) noexcept;
/// "sum", "prod", "min", "max", "avg", "premul_sum", "band", "bor", "bxor".
std::string_view to_string(RedOp op) noexcept;
/// Accepts the names above plus common aliases ("fp16", "bf16", "fp32", "f32", "fp64", "int",
/// "fp8_e4m3", "e5m2", ...; "premulsum", "bitand", "and", "bit_and", "bitor", "or", "bitxor",
/// "xor", ...), case-insensitive.
std::optional<DataType> parse_dtype(std::string_view name) noexcept;
std::optional<RedOp> parse_redop(std::string_view name) noexcept;

/// IEEE 754 binary16 storage type (bit pattern only; loom converts with round-to-nearest-even).
struct half {
  std::uint16_t bits;
};
/// bfloat16 storage type (bit pattern only; loom converts with round-to-nearest-even).
struct bfloat16 {
  std::uint16_t bits;
};

/// OCP FP8 E4M3 storage type, as CUDA's __nv_fp8_e4m3 (bit pattern only; loom converts with
/// round-to-nearest-even, saturating to +-448: the format has no infinity).
struct float8_e4m3 {
  std::uint8_t bits;
};
/// OCP FP8 E5M2 storage type, as CUDA's __nv_fp8_e5m2 (bit pattern only; loom converts with
/// round-to-nearest-even, overflowing to infinity like fp16).
struct float8_e5m2 {
  std::uint8_t bits;
};

/// Maps a C++ element type to its DataType, for the typed std::span overloads.
template <typename T>
struct dtype_of;
template <>
struct dtype_of<std::int8_t> {
  static constexpr DataType value = DataType::Int8;
};
template <>
struct dtype_of<std::uint8_t> {
  static constexpr DataType value = DataType::Uint8;
};
template <>
struct dtype_of<std::int32_t> {
  static constexpr DataType value = DataType::Int32;
};
template <>
struct dtype_of<std::uint32_t> {
  static constexpr DataType value = DataType::Uint32;
};
template <>
struct dtype_of<std::int64_t> {
  static constexpr DataType value = DataType::Int64;
};
template <>
struct dtype_of<std::uint64_t> {
  static constexpr DataType value = DataType::Uint64;
};
template <>
struct dtype_of<half> {
  static constexpr DataType value = DataType::Float16;
};
template <>
struct dtype_of<bfloat16> {
  static constexpr DataType value = DataType::BFloat16;
};
template <>
struct dtype_of<float> {
  static constexpr DataType value = DataType::Float32;
};
template <>
struct dtype_of<double> {
  static constexpr DataType value = DataType::Float64;
};
template <>
struct dtype_of<float8_e4m3> {
  static constexpr DataType value = DataType::Float8E4M3;
};
template <>
struct dtype_of<float8_e5m2> {
  static constexpr DataType value = DataType::Float8E5M2;
};
template <typename T>
inline constexpr DataType dtype_of_v = dtype_of<std::remove_cv_t<T>>::value;

}  // namespace loom
