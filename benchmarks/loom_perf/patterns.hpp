// loom-perf data patterns: the input every rank contributes and the exact result each collective
// must produce. Pure logic with no library symbols (only the header-only enums of loom/types.hpp),
// so the unit tests can link it alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "loom/types.hpp"

namespace loom::perf {

// --- fp16 / bf16 conversions, round to nearest even ----------------------------------------------

float half_to_float(std::uint16_t bits) noexcept;
std::uint16_t float_to_half(float value) noexcept;
float bf16_to_float(std::uint16_t bits) noexcept;
std::uint16_t float_to_bf16(float value) noexcept;

// --- fp8 (OCP e4m3 / e5m2) conversions, round to nearest even -----------------------------------
// As loom defines them: e4m3 saturates to +-448 (it has no infinity; 0x7f/0xff are NaN), e5m2
// overflows to infinity like fp16.

float f8e4m3_to_float(std::uint8_t bits) noexcept;
std::uint8_t float_to_f8e4m3(float value) noexcept;
float f8e5m2_to_float(std::uint8_t bits) noexcept;
std::uint8_t float_to_f8e5m2(float value) noexcept;

// --- Expected values -----------------------------------------------------------------------------

/// The exact result of reducing the small integers `values` (one per rank) with `op` in `dtype`,
/// as loom defines it: integers wrap (two's complement); avg divides the wrapped sum by the rank
/// count at the end (truncating for integers; fp8/fp16/bf16/fp32 as float(sum) / float(n) rounded
/// to nearest even; fp64 in double). Exact only while every partial sum is exact in `dtype` (the
/// Pattern's values are chosen so). Returned as the element's bit pattern, zero-extended.
std::uint64_t reduce_bits(DataType dtype, RedOp op, const int* values, int nranks);
/// The bit pattern of the small integer `value` stored as `dtype`.
std::uint64_t value_bits(DataType dtype, int value);

// --- Patterns ------------------------------------------------------------------------------------

/// Inputs and results of one (dtype, op, nranks, root) combination. Rank r's input element i is a
/// small integer that depends on r, i and root (values 0..6 shrinking for large jobs so sums stay
/// exact: <= 256 in bf16, <= 16 in fp8 e4m3, <= 8 in e5m2; fp8 jobs larger than that get sparse
/// 0/1 inputs; for prod values 1 and 2, so products are powers of two). The pattern repeats
/// with period kPeriod (a prime), which lets fill and verify run as memcpy/memcmp over tables.
class Pattern {
 public:
  static constexpr std::size_t kPeriod = 65521;

  Pattern(DataType dtype, RedOp op, int nranks, int root);

  [[nodiscard]] DataType dtype() const noexcept { return dtype_; }
  [[nodiscard]] RedOp op() const noexcept { return op_; }
  [[nodiscard]] int nranks() const noexcept { return nranks_; }
  [[nodiscard]] int root() const noexcept { return root_; }
  [[nodiscard]] std::size_t elem_size() const noexcept { return elem_; }

  /// The small integer rank `rank` contributes at element `index`.
  [[nodiscard]] int input_value(int rank, std::size_t index) const;
  /// Bit patterns (zero-extended) of one input element and of one reduced element.
  [[nodiscard]] std::uint64_t input_bits(int rank, std::size_t index) const;
  [[nodiscard]] std::uint64_t reduced_bits(std::size_t index) const;

  /// Writes rank `rank`'s input elements [first, first + count) to `dst`.
  void fill_input(void* dst, std::size_t count, int rank, std::size_t first = 0) const;
  /// Writes the reduction over all ranks of elements [first, first + count) to `dst`.
  void fill_reduced(void* dst, std::size_t count, std::size_t first = 0) const;

  struct Mismatch {
    std::size_t wrong = 0;  // elements that differ (bitwise)
    std::size_t first = 0;  // index (relative to `data`) of the first one, if any
  };
  /// Compares `data` with rank `rank`'s input elements [first, first + count).
  [[nodiscard]] Mismatch check_input(const void* data, std::size_t count, int rank,
                                     std::size_t first = 0) const;
  /// Compares `data` with the reduction of elements [first, first + count).
  [[nodiscard]] Mismatch check_reduced(const void* data, std::size_t count,
                                       std::size_t first = 0) const;

 private:
  [[nodiscard]] std::size_t offset(int rank) const noexcept;
  [[nodiscard]] std::uint64_t table_bits(const std::vector<unsigned char>& table,
                                         std::size_t pos) const noexcept;
  void fill(void* dst, std::size_t count, const std::vector<unsigned char>& table,
            std::size_t start) const;
  [[nodiscard]] Mismatch check(const void* data, std::size_t count,
                               const std::vector<unsigned char>& table, std::size_t start) const;

  DataType dtype_;
  RedOp op_;
  int nranks_;
  int root_;
  std::size_t elem_;
  std::vector<std::uint8_t> base_;      // kPeriod small integers (0..6)
  std::vector<unsigned char> input_;    // base_ as elements of dtype_
  std::vector<unsigned char> reduced_;  // reduction over ranks, by position modulo kPeriod
};

/// Flips every bit of `nbytes` bytes: turns an expected buffer into one that differs from the
/// expectation in every element (used to poison receive buffers before a check).
void invert_bytes(void* data, std::size_t nbytes) noexcept;

}  // namespace loom::perf
