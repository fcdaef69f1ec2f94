// Exact expected values for collective tests: small-integer inputs whose reductions are exactly
// representable, and a reference that follows loom's documented semantics (integers wrap, avg
// divides the sum at the end: truncating for integers, in fp32 for 16/32-bit floats).
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/host/reduce.hpp"
#include "loom/types.hpp"

namespace loom::test {

inline std::int64_t input_value(RedOp op, int rank, std::size_t i) {
  if (op == RedOp::Prod)
    return 1 + static_cast<std::int64_t>((static_cast<std::size_t>(rank) + i) % 2);
  return static_cast<std::int64_t>((static_cast<std::size_t>(rank + 1) * 3 + i * 5) % 7);
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
  }
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

/// The expected reduction of input_value(op, r, i) over ranks 0..n-1, as one `dtype` element.
inline void store_expected(DataType dtype, RedOp op, int n, std::size_t i, void* dst) {
  std::int64_t acc = input_value(op, 0, i);
  for (int r = 1; r < n; ++r) {
    std::int64_t v = input_value(op, r, i);
    switch (op) {
      case RedOp::Sum:
      case RedOp::Avg: acc += v; break;
      case RedOp::Prod:
        acc = static_cast<std::int64_t>(static_cast<std::uint64_t>(acc) *
                                        static_cast<std::uint64_t>(v));
        break;
      case RedOp::Min: acc = std::min(acc, v); break;
      case RedOp::Max: acc = std::max(acc, v); break;
    }
  }
  if (op != RedOp::Avg) {
    store_value(dtype, dst, acc);
    return;
  }
  auto put = [&](auto x) { std::memcpy(dst, &x, sizeof x); };
  float f = static_cast<float>(acc) / static_cast<float>(n);
  switch (dtype) {
    case DataType::Float16: put(kernels::float_to_half(f)); break;
    case DataType::BFloat16: put(kernels::float_to_bfloat16(f)); break;
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
    store_value(dtype, p + i * dtype_size(dtype), input_value(op, rank, first + i));
}

}  // namespace loom::test
