// loom-perf data patterns and exact expected values. See patterns.hpp.
#include "benchmarks/loom_perf/patterns.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

namespace loom::perf {
namespace {

// Element bit pattern of an integer result, zero-extended.
template <typename T>
std::uint64_t int_bits(T value) {
  return static_cast<std::uint64_t>(static_cast<std::make_unsigned_t<T>>(value));
}

template <typename T>
std::uint64_t int_reduce(RedOp op, const int* values, int nranks) {
  // Sums and products wrap modulo 2^64, which agrees with wrapping in T.
  std::uint64_t sum = 0;
  std::uint64_t prod = 1;
  T lo = static_cast<T>(values[0]);
  T hi = lo;
  std::uint64_t all = ~std::uint64_t{0}, any = 0, odd = 0;  // bit and / or / xor
  for (int r = 0; r < nranks; ++r) {
    const T v = static_cast<T>(values[r]);
    sum += static_cast<std::uint64_t>(v);
    prod *= static_cast<std::uint64_t>(v);
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    all &= int_bits(v), any |= int_bits(v), odd ^= int_bits(v);
  }
  switch (op) {
    case RedOp::Sum:
    case RedOp::PreMulSum: return int_bits(static_cast<T>(sum));  // loom-perf's scalar is 1
    case RedOp::Prod: return int_bits(static_cast<T>(prod));
    case RedOp::Min: return int_bits(lo);
    case RedOp::Max: return int_bits(hi);
    case RedOp::BitAnd: return all;
    case RedOp::BitOr: return any;
    case RedOp::BitXor: return odd;
    case RedOp::Avg: break;
  }
  const T wrapped = static_cast<T>(sum);
  if constexpr (std::is_signed_v<T>) {
    return int_bits(static_cast<T>(static_cast<std::int64_t>(wrapped) / nranks));
  } else {
    return int_bits(
        static_cast<T>(static_cast<std::uint64_t>(wrapped) / static_cast<std::uint64_t>(nranks)));
  }
}

// double -> float with round to nearest even, overflowing to infinity (a plain conversion of an
// out-of-range double is undefined behaviour). 0x1.ffffffp127 is the midpoint between FLT_MAX and
// 2^128; ties go to the even neighbour, which is infinity.
float narrow_to_float(double d) {
  constexpr double kHalfwayToInf = 0x1.ffffffp127;
  if (std::fabs(d) >= kHalfwayToInf) {
    return std::copysign(std::numeric_limits<float>::infinity(),
                         static_cast<float>(d > 0 ? 1 : -1));
  }
  return static_cast<float>(d);
}

std::uint64_t encode_float(DataType dtype, float f) {
  switch (dtype) {
    case DataType::Float16: return float_to_half(f);
    case DataType::BFloat16: return float_to_bf16(f);
    case DataType::Float8E4M3: return float_to_f8e4m3(f);
    case DataType::Float8E5M2: return float_to_f8e5m2(f);
    default: return std::bit_cast<std::uint32_t>(f);
  }
}

std::uint64_t float_reduce(DataType dtype, RedOp op, const int* values, int nranks) {
  double sum = 0;
  double prod = 1;  // products of 1s and 2s: exact powers of two (inf past the double range;
                    // fp8 e4m3 saturates and e5m2 overflows at the end, as partial products do)
  int lo = values[0];
  int hi = values[0];
  for (int r = 0; r < nranks; ++r) {
    sum += values[r];
    prod *= values[r];
    lo = std::min(lo, values[r]);
    hi = std::max(hi, values[r]);
  }
  double result = 0;
  switch (op) {
    case RedOp::Sum:
    case RedOp::PreMulSum: result = sum; break;  // loom-perf's scalar is 1
    case RedOp::Prod: result = prod; break;
    case RedOp::Min: result = lo; break;
    case RedOp::Max: result = hi; break;
    case RedOp::Avg:
      if (dtype == DataType::Float64) {
        result = sum / nranks;
        break;
      }
      return encode_float(dtype, static_cast<float>(sum) / static_cast<float>(nranks));
    case RedOp::BitAnd:
    case RedOp::BitOr:
    case RedOp::BitXor: return 0;  // integer types only: never run (see Runner::run)
  }
  if (dtype == DataType::Float64) return std::bit_cast<std::uint64_t>(result);
  return encode_float(dtype, narrow_to_float(result));
}

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

void store_bits(unsigned char* dst, std::size_t elem, std::uint64_t bits) {
  switch (elem) {
    case 1: *dst = static_cast<std::uint8_t>(bits); return;
    case 2: {
      const auto v = static_cast<std::uint16_t>(bits);
      std::memcpy(dst, &v, 2);
      return;
    }
    case 4: {
      const auto v = static_cast<std::uint32_t>(bits);
      std::memcpy(dst, &v, 4);
      return;
    }
    default: std::memcpy(dst, &bits, 8); return;
  }
}

template <typename U>
std::uint64_t load_as(const unsigned char* src) {
  U v;
  std::memcpy(&v, src, sizeof(U));
  return v;
}

std::uint64_t load_bits(const unsigned char* src, std::size_t elem) {
  switch (elem) {
    case 1: return *src;
    case 2: return load_as<std::uint16_t>(src);
    case 4: return load_as<std::uint32_t>(src);
    default: return load_as<std::uint64_t>(src);
  }
}

// Counts differing elements of width sizeof(U); records the first one's index in `first`.
template <typename U>
std::size_t count_diff(const unsigned char* a, const unsigned char* b, std::size_t n,
                       std::size_t* first) {
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i) {
    U x;
    U y;
    std::memcpy(&x, a + i * sizeof(U), sizeof(U));
    std::memcpy(&y, b + i * sizeof(U), sizeof(U));
    if (x != y) {
      if (wrong == 0) *first = i;
      ++wrong;
    }
  }
  return wrong;
}

std::size_t count_diff(const unsigned char* a, const unsigned char* b, std::size_t n,
                       std::size_t elem, std::size_t* first) {
  switch (elem) {
    case 1: return count_diff<std::uint8_t>(a, b, n, first);
    case 2: return count_diff<std::uint16_t>(a, b, n, first);
    case 4: return count_diff<std::uint32_t>(a, b, n, first);
    default: return count_diff<std::uint64_t>(a, b, n, first);
  }
}

// One fp8 format: `mant` stored mantissa bits, exponent bias, and whether it is "finite" (e4m3: no
// infinity, only S.1111.111 is NaN, the top exponent holds normal numbers, overflow saturates).
struct F8 {
  int mant;
  int bias;
  bool finite;
  [[nodiscard]] int top_exp() const { return (1 << (7 - mant)) - 1; }  // the all-ones field
  [[nodiscard]] double max_finite() const {
    return finite ? std::ldexp((2 << mant) - 2, top_exp() - bias - mant)
                  : std::ldexp((2 << mant) - 1, top_exp() - 1 - bias - mant);
  }
};
constexpr F8 kE4M3{3, 7, true};
constexpr F8 kE5M2{2, 15, false};

float f8_to_float(F8 f, std::uint8_t bits) {
  const bool neg = (bits & 0x80U) != 0;
  const int e = (bits & 0x7f) >> f.mant;
  const int m = bits & ((1 << f.mant) - 1);
  float mag = 0;
  if (f.finite ? (bits & 0x7f) == 0x7f : (e == f.top_exp() && m != 0)) {
    mag = std::numeric_limits<float>::quiet_NaN();
  } else if (!f.finite && e == f.top_exp()) {
    mag = std::numeric_limits<float>::infinity();
  } else if (e == 0) {
    mag = std::ldexp(static_cast<float>(m), 1 - f.bias - f.mant);
  } else {
    mag = std::ldexp(static_cast<float>((1 << f.mant) + m), e - f.bias - f.mant);
  }
  return neg ? -mag : mag;
}

std::uint8_t float_to_f8(F8 f, float value) {
  const auto sign = static_cast<std::uint8_t>(std::signbit(value) ? 0x80 : 0);
  const auto overflow = static_cast<std::uint8_t>(f.finite ? 0x7e : 0x7c);  // 448 or inf
  if (std::isnan(value)) {  // quiet; e5m2 keeps the payload bit below the quiet bit
    const std::uint32_t payload = (std::bit_cast<std::uint32_t>(value) >> 21) & 1U;
    return static_cast<std::uint8_t>(sign | (f.finite ? 0x7fU : 0x7eU | payload));
  }
  const double a = std::fabs(static_cast<double>(value));
  if (std::isinf(a)) return sign | overflow;
  if (a == 0) return sign;
  const int exp = std::max(std::ilogb(a), 1 - f.bias);  // exponent of the ulp grid
  const double ulp = std::ldexp(1.0, exp - f.mant);
  const double r = std::nearbyint(a / ulp) * ulp;  // default rounding: nearest, ties to even
  if (r > f.max_finite()) return sign | overflow;
  if (r < std::ldexp(1.0, 1 - f.bias)) {  // subnormal
    return static_cast<std::uint8_t>(sign |
                                     static_cast<int>(r / std::ldexp(1.0, 1 - f.bias - f.mant)));
  }
  const int e = std::ilogb(r);
  const int m = static_cast<int>(r / std::ldexp(1.0, e - f.mant)) - (1 << f.mant);
  return static_cast<std::uint8_t>(sign | ((e + f.bias) << f.mant) | m);
}

}  // namespace

float f8e4m3_to_float(std::uint8_t bits) noexcept {
  return f8_to_float(kE4M3, bits);
}
std::uint8_t float_to_f8e4m3(float value) noexcept {
  return float_to_f8(kE4M3, value);
}
float f8e5m2_to_float(std::uint8_t bits) noexcept {
  return f8_to_float(kE5M2, bits);
}
std::uint8_t float_to_f8e5m2(float value) noexcept {
  return float_to_f8(kE5M2, value);
}

float half_to_float(std::uint16_t bits) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000U) << 16;
  const std::uint32_t exp = (bits >> 10) & 0x1fU;
  const std::uint32_t mant = bits & 0x3ffU;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000U | (mant << 13));
  if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact in float
    const float mag = std::ldexp(static_cast<float>(mant), -24);
    return sign != 0 ? -mag : mag;
  }
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

std::uint16_t float_to_half(float value) noexcept {
  const auto x = std::bit_cast<std::uint32_t>(value);
  const auto sign = static_cast<std::uint32_t>((x >> 16) & 0x8000U);
  const std::uint32_t abs = x & 0x7fffffffU;
  if (abs > 0x7f800000U) {  // NaN: keep it quiet, keep the top payload bits
    return static_cast<std::uint16_t>(sign | 0x7e00U | ((abs >> 13) & 0x3ffU));
  }
  if (abs >= 0x47800000U) return static_cast<std::uint16_t>(sign | 0x7c00U);  // >= 2^16: inf
  const std::uint32_t exp = abs >> 23;
  std::uint32_t mant = abs & 0x7fffffU;
  std::uint32_t shift = 13;  // mantissa bits dropped
  std::uint32_t h = 0;
  if (exp >= 113) {  // normal half
    h = ((exp - 112) << 10) | (mant >> 13);
  } else {  // subnormal half (or zero): value / 2^-24 = mant' * 2^(exp - 126)
    if (exp == 0 || 126 - exp > 24) return static_cast<std::uint16_t>(sign);
    mant |= 0x800000U;
    shift = 126 - exp;
    h = mant >> shift;
  }
  const std::uint32_t rem = mant & ((1U << shift) - 1);
  const std::uint32_t halfway = 1U << (shift - 1);
  if (rem > halfway || (rem == halfway && (h & 1U) != 0)) ++h;  // carries into exp / inf
  return static_cast<std::uint16_t>(sign | h);
}

float bf16_to_float(std::uint16_t bits) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

std::uint16_t float_to_bf16(float value) noexcept {
  const auto x = std::bit_cast<std::uint32_t>(value);
  if ((x & 0x7fffffffU) > 0x7f800000U) return static_cast<std::uint16_t>((x >> 16) | 0x40U);
  const std::uint32_t rounded = x + 0x7fffU + ((x >> 16) & 1U);
  return static_cast<std::uint16_t>(rounded >> 16);
}

std::uint64_t reduce_bits(DataType dtype, RedOp op, const int* values, int nranks) {
  switch (dtype) {
    case DataType::Int8: return int_reduce<std::int8_t>(op, values, nranks);
    case DataType::Uint8: return int_reduce<std::uint8_t>(op, values, nranks);
    case DataType::Int32: return int_reduce<std::int32_t>(op, values, nranks);
    case DataType::Uint32: return int_reduce<std::uint32_t>(op, values, nranks);
    case DataType::Int64: return int_reduce<std::int64_t>(op, values, nranks);
    case DataType::Uint64: return int_reduce<std::uint64_t>(op, values, nranks);
    default: return float_reduce(dtype, op, values, nranks);
  }
}

std::uint64_t value_bits(DataType dtype, int value) {
  return reduce_bits(dtype, RedOp::Sum, &value, 1);
}

Pattern::Pattern(DataType dtype, RedOp op, int nranks, int root)
    : dtype_(dtype),
      op_(op),
      nranks_(std::max(nranks, 1)),
      root_(root),
      elem_(dtype_size(dtype)),
      base_(kPeriod),
      input_(kPeriod * elem_),
      reduced_(kPeriod * elem_) {
  // Sums of up to nranks values <= max_value stay <= `exact`, the largest integer up to which all
  // integers are exact in the dtype: then every partial sum, in whatever order the collective
  // adds, is exact too. 256 covers bf16 (and every wider type); fp8 has 16 (e4m3) or 8 (e5m2).
  const int exact = dtype == DataType::Float8E4M3 ? 16 : dtype == DataType::Float8E5M2 ? 8 : 256;
  const int max_value = std::clamp(exact / nranks_, 1, 6);
  // More ranks than that (fp8): 1 at only `exact` evenly spaced positions of the period, 0
  // elsewhere, so no element's sum over the ranks can exceed `exact`.
  const bool sparse = nranks_ > exact && op != RedOp::Prod;
  const std::uint64_t seed = op == RedOp::Prod ? 0x5eedULL : 0x10adULL;
  for (std::size_t j = 0; j < kPeriod; ++j) {
    const std::uint64_t h = splitmix64(seed * kPeriod + j) >> 32;
    int v = op == RedOp::Prod ? (h % 3 == 0 ? 2 : 1) : static_cast<int>(h % (max_value + 1));
    if (sparse) v = j % (kPeriod / static_cast<std::size_t>(exact) + 1) == 0 ? 1 : 0;
    base_[j] = static_cast<std::uint8_t>(v);
    store_bits(&input_[j * elem_], elem_, value_bits(dtype, v));
  }
  std::vector<int> values(static_cast<std::size_t>(nranks_));
  for (std::size_t j = 0; j < kPeriod; ++j) {
    for (int r = 0; r < nranks_; ++r) values[r] = base_[(j + offset(r)) % kPeriod];
    store_bits(&reduced_[j * elem_], elem_, reduce_bits(dtype, op, values.data(), nranks_));
  }
}

std::size_t Pattern::offset(int rank) const noexcept {
  constexpr std::uint64_t kRankStride = 7919;  // prime, so ranks land on distinct offsets
  constexpr std::uint64_t kRootStride = 3571;
  const auto r = static_cast<std::uint64_t>(rank);
  const auto root = static_cast<std::uint64_t>(std::max(root_, 0));
  return static_cast<std::size_t>((r * kRankStride + root * kRootStride) % kPeriod);
}

std::uint64_t Pattern::table_bits(const std::vector<unsigned char>& table,
                                  std::size_t pos) const noexcept {
  return load_bits(&table[pos * elem_], elem_);
}

int Pattern::input_value(int rank, std::size_t index) const {
  return base_[(index % kPeriod + offset(rank)) % kPeriod];
}

std::uint64_t Pattern::input_bits(int rank, std::size_t index) const {
  return table_bits(input_, (index % kPeriod + offset(rank)) % kPeriod);
}

std::uint64_t Pattern::reduced_bits(std::size_t index) const {
  return table_bits(reduced_, index % kPeriod);
}

void Pattern::fill_input(void* dst, std::size_t count, int rank, std::size_t first) const {
  fill(dst, count, input_, first % kPeriod + offset(rank));
}

void Pattern::fill_reduced(void* dst, std::size_t count, std::size_t first) const {
  fill(dst, count, reduced_, first);
}

Pattern::Mismatch Pattern::check_input(const void* data, std::size_t count, int rank,
                                       std::size_t first) const {
  return check(data, count, input_, first % kPeriod + offset(rank));
}

Pattern::Mismatch Pattern::check_reduced(const void* data, std::size_t count,
                                         std::size_t first) const {
  return check(data, count, reduced_, first);
}

void Pattern::fill(void* dst, std::size_t count, const std::vector<unsigned char>& table,
                   std::size_t start) const {
  auto* out = static_cast<unsigned char*>(dst);
  std::size_t pos = start % kPeriod;
  while (count > 0) {
    const std::size_t run = std::min(count, kPeriod - pos);
    std::memcpy(out, &table[pos * elem_], run * elem_);
    out += run * elem_;
    count -= run;
    pos = 0;
  }
}

Pattern::Mismatch Pattern::check(const void* data, std::size_t count,
                                 const std::vector<unsigned char>& table, std::size_t start) const {
  const auto* in = static_cast<const unsigned char*>(data);
  Mismatch result;
  std::size_t pos = start % kPeriod;
  for (std::size_t done = 0; done < count;) {
    const std::size_t run = std::min(count - done, kPeriod - pos);
    const unsigned char* got = in + done * elem_;
    const unsigned char* want = &table[pos * elem_];
    if (std::memcmp(got, want, run * elem_) != 0) {
      std::size_t first = 0;
      const std::size_t wrong = count_diff(got, want, run, elem_, &first);
      if (result.wrong == 0) result.first = done + first;
      result.wrong += wrong;
    }
    done += run;
    pos = 0;
  }
  return result;
}

void invert_bytes(void* data, std::size_t nbytes) noexcept {
  auto* p = static_cast<unsigned char*>(data);
  for (std::size_t i = 0; i < nbytes; ++i) p[i] = static_cast<unsigned char>(~p[i]);
}

}  // namespace loom::perf
