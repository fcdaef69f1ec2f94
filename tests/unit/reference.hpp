// Exact expected values for collective tests: small-integer inputs whose reductions are exactly
// representable, and a reference that follows loom's documented semantics (integers wrap, avg
// divides the sum at the end: truncating for integers, in fp32 for 8/16/32-bit floats).
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/host/reduce.hpp"
#include "loom/types.hpp"

namespace loom::test {

/// Every dtype, and every op; the collective test matrices run the pairs loom::supports()
/// accepts (ops_for: bitwise ops only on integer types).
inline constexpr DataType kAllTypes[] = {
    DataType::Int8,    DataType::Uint8,   DataType::Int32,      DataType::Uint32,
    DataType::Int64,   DataType::Uint64,  DataType::Float16,    DataType::BFloat16,
    DataType::Float32, DataType::Float64, DataType::Float8E4M3, DataType::Float8E5M2};
inline constexpr RedOp kAllOps[] = {RedOp::Sum,    RedOp::Prod,  RedOp::Min,
                                    RedOp::Max,    RedOp::Avg,   RedOp::PreMulSum,
                                    RedOp::BitAnd, RedOp::BitOr, RedOp::BitXor};
inline std::vector<RedOp> ops_for(DataType t) {
  std::vector<RedOp> out;
  for (RedOp op : kAllOps)
    if (supports(t, op)) out.push_back(op);
  return out;
}

/// Largest n such that every integer 0..n is exact in `dtype` (fp8: 16 for e4m3, 8 for e5m2;
/// the others hold far more than the tests' sums).
inline std::int64_t exact_integer_limit(DataType dtype) {
  if (dtype == DataType::Float8E4M3) return 16;
  if (dtype == DataType::Float8E5M2) return 8;
  return 256;
}

/// Rank `rank`'s input element i. Prod: 1 or 2, so products over up to 8 ranks are powers of two
/// <= 256 (exact in every dtype, fp8 included). Otherwise 0..6, so sums over up to 8 ranks stay
/// <= 48, except fp8: 0..2 for e4m3 and 0..1 for e5m2, so that sums over up to 8 ranks stay within
/// exact_integer_limit (store_expected checks it) and every partial sum, in any order, is exact.
inline std::int64_t input_value(DataType dtype, RedOp op, int rank, std::size_t i) {
  if (op == RedOp::Prod)
    return 1 + static_cast<std::int64_t>((static_cast<std::size_t>(rank) + i) % 2);
  const auto v = static_cast<std::int64_t>((static_cast<std::size_t>(rank + 1) * 3 + i * 5) % 7);
  if (dtype == DataType::Float8E4M3) return v % 3;
  if (dtype == DataType::Float8E5M2) return v % 2;
  return v;
}

/// Writes integer `v` as one element of `dtype` (integers truncated to the type's width).
inline void store_value(DataType dtype, void* dst, std::int64_t v) {
  auto put = [&](auto x) { std::memcpy(dst, &x, sizeof x); };
  switch (dtype) {
    case DataType::Int8: put(static_cast<std::int8_t>(v)); break;
    case DataType::Uint8: put(static_cast<std::uint8_t>(v)); break;
    case DataType::Int32: put(static_cast<std::int32_t>(v)); break;
    case DataType::Uint32: put(static_cast<std::uint32_t>(v)); break;
    case DataType::Int64: put(static_cast<std::int64_t>(v)); break;
    case DataType::Uint64: put(static_cast<std::uint64_t>(v)); break;
    case DataType::Float16: put(kernels::float_to_half(static_cast<float>(v))); break;
    case DataType::BFloat16: put(kernels::float_to_bfloat16(static_cast<float>(v))); break;
    case DataType::Float32: put(static_cast<float>(v)); break;
    case DataType::Float64: put(static_cast<double>(v)); break;
    case DataType::Float8E4M3: put(kernels::float_to_fp8_e4m3(static_cast<float>(v))); break;
    case DataType::Float8E5M2: put(kernels::float_to_fp8_e5m2(static_cast<float>(v))); break;
  }
}

/// The value at `src` as a double (exact for every type).
inline double load_value(DataType dtype, const void* src) {
  auto get = [&](auto x) {
    std::memcpy(&x, src, sizeof x);
    return x;
  };
  switch (dtype) {
    case DataType::Int8: return get(std::int8_t{});
    case DataType::Uint8: return get(std::uint8_t{});
    case DataType::Int32: return get(std::int32_t{});
    case DataType::Uint32: return get(std::uint32_t{});
    case DataType::Int64: return static_cast<double>(get(std::int64_t{}));
    case DataType::Uint64: return static_cast<double>(get(std::uint64_t{}));
    case DataType::Float16: return kernels::half_to_float(get(std::uint16_t{}));
    case DataType::BFloat16: return kernels::bfloat16_to_float(get(std::uint16_t{}));
    case DataType::Float32: return get(float{});
    case DataType::Float64: return get(double{});
    case DataType::Float8E4M3: return kernels::fp8_e4m3_to_float(get(std::uint8_t{}));
    case DataType::Float8E5M2: return kernels::fp8_e5m2_to_float(get(std::uint8_t{}));
  }
  return 0;
}

/// Truncates to the width and signedness of an integer dtype (two's complement wrap).
inline std::int64_t wrap(DataType dtype, std::int64_t v) {
  switch (dtype) {
    case DataType::Int8: return static_cast<std::int8_t>(v);
    case DataType::Uint8: return static_cast<std::uint8_t>(v);
    case DataType::Int32: return static_cast<std::int32_t>(v);
    case DataType::Uint32: return static_cast<std::uint32_t>(v);
    default: return v;
  }
}

/// The expected reduction of input_value(dtype, op, r, i) over ranks 0..n-1, as one `dtype`
/// element. Throws if a floating-point sum is not exact in `dtype` (the expectation would be
/// wrong: the collective rounds partial sums in an order of its choosing).
inline void store_expected(DataType dtype, RedOp op, int n, std::size_t i, void* dst) {
  std::int64_t acc = input_value(dtype, op, 0, i);
  for (int r = 1; r < n; ++r) {
    std::int64_t v = input_value(dtype, op, r, i);
    switch (op) {
      case RedOp::Sum:
      case RedOp::Avg:
      case RedOp::PreMulSum: acc += v; break;  // scalar 1 (the collectives take none yet)
      case RedOp::Prod:
        acc = static_cast<std::int64_t>(static_cast<std::uint64_t>(acc) *
                                        static_cast<std::uint64_t>(v));
        break;
      case RedOp::Min: acc = std::min(acc, v); break;
      case RedOp::Max: acc = std::max(acc, v); break;
      case RedOp::BitAnd: acc &= v; break;  // integer types only
      case RedOp::BitOr: acc |= v; break;
      case RedOp::BitXor: acc ^= v; break;
    }
  }
  if (is_floating(dtype) && (op == RedOp::Sum || op == RedOp::Avg || op == RedOp::PreMulSum) &&
      acc > exact_integer_limit(dtype))
    throw std::logic_error("reference: a sum of " + std::to_string(n) +
                           " ranks' inputs is not exact in this dtype");
  if (op != RedOp::Avg) {
    store_value(dtype, dst, acc);
    return;
  }
  auto put = [&](auto x) { std::memcpy(dst, &x, sizeof x); };
  float f = static_cast<float>(acc) / static_cast<float>(n);
  switch (dtype) {
    case DataType::Float16: put(kernels::float_to_half(f)); break;
    case DataType::BFloat16: put(kernels::float_to_bfloat16(f)); break;
    case DataType::Float8E4M3: put(kernels::float_to_fp8_e4m3(f)); break;
    case DataType::Float8E5M2: put(kernels::float_to_fp8_e5m2(f)); break;
    case DataType::Float32: put(f); break;
    case DataType::Float64: put(static_cast<double>(acc) / n); break;
    default: store_value(dtype, dst, wrap(dtype, acc) / n); break;
  }
}

/// Fills `count` elements of rank `rank`'s input starting at element index `first`.
inline void fill_input(DataType dtype, RedOp op, int rank, void* buf, std::size_t count,
                       std::size_t first = 0) {
  auto* p = static_cast<std::uint8_t*>(buf);
  for (std::size_t i = 0; i < count; ++i)
    store_value(dtype, p + i * dtype_size(dtype), input_value(dtype, op, rank, first + i));
}

}  // namespace loom::test
