// loom-perf pattern and expected-value code (benchmarks/loom_perf/patterns.cpp) against an
// independent brute-force reference: reductions simulated step by step in the element type, with
// fp8/fp16/bf16 rounding done by searching the sorted table of all representable values.
#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "benchmarks/loom_perf/patterns.hpp"

namespace {

using loom::DataType;
using loom::RedOp;
using loom::perf::Pattern;

constexpr int kRankCounts[] = {1, 2, 3, 5, 8};

// --- Reference fp16 / bf16 / fp8: all non-negative finite values by bit pattern, plus the first
// pattern past the largest (the infinity pattern, standing for 2^16 resp. 2^128; for fp8 e4m3,
// which has no infinity, its NaN pattern 0x7f standing for 480). ------------------------------

struct SmallFloat {
  int mant_bits;  // 10 for fp16, 7 for bf16, 3 for e4m3, 2 for e5m2
  int bias;       // 15, 127, 7, 15
  std::uint16_t inf_bits;
  std::uint16_t sign_bit;      // 0x8000, or 0x80 for fp8
  bool saturate;               // e4m3: overflow gives the largest finite value
  std::vector<double> values;  // values[bits] for bits in [0, inf_bits]
};

SmallFloat make_small_float(int mant_bits, int bias, std::uint16_t inf_bits,
                            std::uint16_t sign_bit = 0x8000, bool saturate = false) {
  SmallFloat f{mant_bits, bias, inf_bits, sign_bit, saturate, {}};
  for (int bits = 0; bits <= inf_bits; ++bits) {
    const int e = bits >> mant_bits;
    const int m = bits & ((1 << mant_bits) - 1);
    const double v = e == 0 ? std::ldexp(m, 1 - bias - mant_bits)
                            : std::ldexp((1 << mant_bits) + m, e - bias - mant_bits);
    f.values.push_back(v);
  }
  return f;
}

const SmallFloat& ref_half() {
  static const SmallFloat f = make_small_float(10, 15, 0x7c00);
  return f;
}
const SmallFloat& ref_bf16() {
  static const SmallFloat f = make_small_float(7, 127, 0x7f80);
  return f;
}
const SmallFloat& ref_e4m3() {
  static const SmallFloat f = make_small_float(3, 7, 0x7f, 0x80, true);
  return f;
}
const SmallFloat& ref_e5m2() {
  static const SmallFloat f = make_small_float(2, 15, 0x7c, 0x80);
  return f;
}

// Round to nearest, ties to the even bit pattern, by search; overflow gives inf_bits, or the
// largest finite pattern when the format saturates.
std::uint16_t ref_round(const SmallFloat& f, double x) {
  const std::uint16_t sign = std::signbit(x) ? f.sign_bit : 0;
  const auto top = static_cast<std::uint16_t>(f.saturate ? f.inf_bits - 1 : f.inf_bits);
  const double a = std::fabs(x);
  if (a >= f.values.back()) return sign | top;
  const auto it = std::lower_bound(f.values.begin(), f.values.end(), a);
  auto hi = static_cast<std::uint16_t>(it - f.values.begin());
  if (f.values[hi] == a || hi == 0) return sign | hi;
  const auto lo = static_cast<std::uint16_t>(hi - 1);
  const double dlo = a - f.values[lo];
  const double dhi = f.values[hi] - a;
  if (dlo < dhi || (dlo == dhi && lo % 2 == 0)) hi = lo;
  return sign | std::min(hi, top);
}

double ref_value(const SmallFloat& f, std::uint16_t bits) {
  const int mask = f.sign_bit - 1;
  const double mag =
      (bits & mask) >= f.inf_bits ? std::numeric_limits<double>::infinity() : f.values[bits & mask];
  return (bits & f.sign_bit) != 0 ? -mag : mag;
}

float ref_to_float(double x) {  // our values: exact in float, or powers of two (inf from 2^128)
  if (x >= std::ldexp(1.0, 128)) return std::numeric_limits<float>::infinity();
  return static_cast<float>(x);
}

// --- Reference reductions, simulated rank by rank in the element type. ----------------------

template <typename T>
std::uint64_t ref_int(RedOp op, const std::vector<int>& v) {
  auto step = [op](T a, T b) -> T {
    // Sign-extend, then wrap modulo 2^64 (agrees with wrapping in T).
    const auto ua = static_cast<std::uint64_t>(static_cast<std::int64_t>(a));
    const auto ub = static_cast<std::uint64_t>(static_cast<std::int64_t>(b));
    switch (op) {
      case RedOp::Prod: return static_cast<T>(ua * ub);
      case RedOp::Min: return std::min(a, b);
      case RedOp::Max: return std::max(a, b);
      case RedOp::BitAnd: return static_cast<T>(ua & ub);
      case RedOp::BitOr: return static_cast<T>(ua | ub);
      case RedOp::BitXor: return static_cast<T>(ua ^ ub);
      default: return static_cast<T>(ua + ub);  // Sum, PreMulSum (scalar 1), Avg before /n
    }
  };
  T acc = static_cast<T>(v[0]);
  for (std::size_t r = 1; r < v.size(); ++r) acc = step(acc, static_cast<T>(v[r]));
  if (op == RedOp::Avg) {
    acc = static_cast<T>(std::trunc(static_cast<double>(acc) / static_cast<double>(v.size())));
  }
  return static_cast<std::make_unsigned_t<T>>(acc);
}

// Element <-> double for the floating types.
double ref_decode(DataType t, std::uint64_t bits) {
  switch (t) {
    case DataType::Float16: return ref_value(ref_half(), static_cast<std::uint16_t>(bits));
    case DataType::BFloat16: return ref_value(ref_bf16(), static_cast<std::uint16_t>(bits));
    case DataType::Float8E4M3: return ref_value(ref_e4m3(), static_cast<std::uint16_t>(bits));
    case DataType::Float8E5M2: return ref_value(ref_e5m2(), static_cast<std::uint16_t>(bits));
    case DataType::Float32: return std::bit_cast<float>(static_cast<std::uint32_t>(bits));
    default: return std::bit_cast<double>(bits);
  }
}
std::uint64_t ref_encode(DataType t, double x) {
  switch (t) {
    case DataType::Float16: return ref_round(ref_half(), x);
    case DataType::BFloat16: return ref_round(ref_bf16(), x);
    case DataType::Float8E4M3: return ref_round(ref_e4m3(), x);
    case DataType::Float8E5M2: return ref_round(ref_e5m2(), x);
    case DataType::Float32: return std::bit_cast<std::uint32_t>(ref_to_float(x));
    default: return std::bit_cast<std::uint64_t>(x);
  }
}

std::uint64_t ref_float(DataType t, RedOp op, const std::vector<int>& v) {
  std::uint64_t acc = ref_encode(t, v[0]);
  for (std::size_t r = 1; r < v.size(); ++r) {
    const double a = ref_decode(t, acc);
    const double b = v[r];
    double x = a + b;
    if (op == RedOp::Prod) x = a * b;
    if (op == RedOp::Min) x = std::min(a, b);
    if (op == RedOp::Max) x = std::max(a, b);
    acc = ref_encode(t, x);
  }
  if (op != RedOp::Avg) return acc;
  const double n = static_cast<double>(v.size());
  if (t == DataType::Float64) return ref_encode(t, ref_decode(t, acc) / n);
  return ref_encode(t, static_cast<float>(ref_decode(t, acc) / n));  // float division, RNE
}

std::uint64_t ref_reduce(DataType t, RedOp op, const std::vector<int>& v) {
  switch (t) {
    case DataType::Int8: return ref_int<std::int8_t>(op, v);
    case DataType::Uint8: return ref_int<std::uint8_t>(op, v);
    case DataType::Int32: return ref_int<std::int32_t>(op, v);
    case DataType::Uint32: return ref_int<std::uint32_t>(op, v);
    case DataType::Int64: return ref_int<std::int64_t>(op, v);
    case DataType::Uint64: return ref_int<std::uint64_t>(op, v);
    default: return ref_float(t, op, v);
  }
}

std::uint64_t load(const unsigned char* p, std::size_t elem) {
  std::uint64_t v = 0;  // little-endian host
  std::memcpy(&v, p, elem);
  return v;
}

std::vector<std::size_t> sample_indices() {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < 300; ++i) out.push_back(i);
  for (std::size_t i = Pattern::kPeriod - 150; i < Pattern::kPeriod + 150; ++i) out.push_back(i);
  for (std::size_t i = 0; i < 50; ++i) out.push_back((std::size_t{1} << 33) + i * 7919);
  return out;
}

// Value sets whose reductions stay exact until the final rounding (products: powers of two or
// small), including ones that wrap in 8-bit integers and overflow fp16.
std::vector<std::vector<int>> corner_cases() {
  std::vector<std::vector<int>> cases = {{100, 100},   {200, 100},      {1, 1, 0},
                                         {6, 6, 6, 5}, {0, 6, 3, 3, 5}, {100, 100, 1}};
  for (const std::size_t n : {8, 16, 40, 130}) cases.emplace_back(n, 2);
  std::vector<int> cycle;
  cycle.reserve(36);
  for (int r = 0; r < 36; ++r) cycle.push_back(r % 7);
  cases.push_back(cycle);
  return cases;
}

// fp8 keeps integers exact only up to 16 (e4m3) / 8 (e5m2). A corner case with larger values,
// sums, or non-power-of-two products beyond that does not reduce exactly in fp8 (reduce_bits
// describes no real collective there, and Pattern never produces one): skipped for fp8.
bool exact_enough(DataType t, RedOp op, const std::vector<int>& v) {
  const int limit = t == DataType::Float8E4M3   ? 16
                    : t == DataType::Float8E5M2 ? 8
                                                : std::numeric_limits<int>::max();
  double sum = 0;
  double prod = 1;
  bool small = true;  // all values 0, 1 or 2: products are powers of two (or 0)
  for (const int x : v) {
    if (x > limit) return false;
    sum += x;
    prod *= x;
    small = small && x <= 2;
  }
  if (op == RedOp::Prod) return small || prod <= limit;
  return op == RedOp::Min || op == RedOp::Max || sum <= limit;
}

DataType dtype_at(int i) {
  return static_cast<DataType>(i);
}
RedOp op_at(int i) {
  return static_cast<RedOp>(i);
}

}  // namespace

TEST_CASE("perf: fp16 and bf16 conversions round to nearest even", "[perf]") {
  int bad = 0;
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    const bool nan_h = (bits & 0x7c00) == 0x7c00 && (bits & 0x3ff) != 0;
    const bool nan_b = (bits & 0x7f80) == 0x7f80 && (bits & 0x7f) != 0;
    const float h = loom::perf::half_to_float(bits);
    const float f = loom::perf::bf16_to_float(bits);
    if (nan_h != std::isnan(h) || nan_b != std::isnan(f)) ++bad;
    if (!nan_h && (loom::perf::float_to_half(h) != bits || h != ref_decode(DataType::Float16, b))) {
      ++bad;
    }
    if (!nan_b &&
        (loom::perf::float_to_bf16(f) != bits || f != ref_decode(DataType::BFloat16, b))) {
      ++bad;
    }
  }
  CHECK(bad == 0);

  std::mt19937_64 rng(42);
  std::vector<float> samples = {0.0f,
                                -0.0f,
                                65504.0f,
                                65519.99f,
                                65520.0f,
                                1e-8f,
                                2.98e-8f,
                                5.96e-8f,
                                6.1e-5f,
                                3.4e38f,
                                std::numeric_limits<float>::max(),
                                std::numeric_limits<float>::infinity()};
  for (int i = 0; i < 200000; ++i) {
    samples.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(rng())));
  }
  for (const float x : samples) {
    if (std::isnan(x)) {
      bad += !std::isnan(loom::perf::half_to_float(loom::perf::float_to_half(x)));
      bad += !std::isnan(loom::perf::bf16_to_float(loom::perf::float_to_bf16(x)));
      continue;
    }
    bad += loom::perf::float_to_half(x) != ref_round(ref_half(), x);
    bad += loom::perf::float_to_bf16(x) != ref_round(ref_bf16(), x);
  }
  CHECK(bad == 0);
}

TEST_CASE("perf: expected values match a brute-force reference", "[perf]") {
  const std::vector<std::size_t> indices = sample_indices();
  for (int t = 0; t < loom::kNumDataTypes; ++t) {
    for (int o = 0; o < loom::kNumRedOps; ++o) {
      if (!loom::supports(dtype_at(t), op_at(o))) continue;
      for (const int n : kRankCounts) {
        for (const int root : {0, n - 1}) {
          const Pattern p(dtype_at(t), op_at(o), n, root);
          INFO("dtype " << t << " op " << o << " nranks " << n << " root " << root);
          int bad = 0;
          std::vector<int> v(static_cast<std::size_t>(n));
          for (const std::size_t i : indices) {
            for (int r = 0; r < n; ++r) {
              v[r] = p.input_value(r, i);
              bad += p.input_bits(r, i) != ref_reduce(dtype_at(t), RedOp::Sum, {v[r]});
              bad += op_at(o) == RedOp::Prod ? (v[r] != 1 && v[r] != 2) : (v[r] < 0 || v[r] > 6);
            }
            const std::uint64_t want = ref_reduce(dtype_at(t), op_at(o), v);
            bad += p.reduced_bits(i) != want;
            bad += loom::perf::reduce_bits(dtype_at(t), op_at(o), v.data(), n) != want;
          }
          CHECK(bad == 0);
        }
      }
    }
  }
}

TEST_CASE("perf: wrapping, avg and overflow corner cases", "[perf]") {
  using loom::perf::reduce_bits;
  for (int t = 0; t < loom::kNumDataTypes; ++t) {
    for (int o = 0; o < loom::kNumRedOps; ++o) {
      if (!loom::supports(dtype_at(t), op_at(o))) continue;
      for (const std::vector<int>& v : corner_cases()) {
        if (!exact_enough(dtype_at(t), op_at(o), v)) continue;
        INFO("dtype " << t << " op " << o << " nranks " << v.size() << " v0 " << v[0]);
        const auto n = static_cast<int>(v.size());
        CHECK(reduce_bits(dtype_at(t), op_at(o), v.data(), n) ==
              ref_reduce(dtype_at(t), op_at(o), v));
      }
    }
  }
  const int hundreds[] = {100, 100};
  CHECK(reduce_bits(DataType::Int8, RedOp::Sum, hundreds, 2) == 0xC8);  // 200 wraps to -56
  CHECK(reduce_bits(DataType::Int8, RedOp::Avg, hundreds, 2) == 0xE4);  // -56 / 2 = -28
  const int thirds[] = {1, 1, 0};
  CHECK(reduce_bits(DataType::Float16, RedOp::Avg, thirds, 3) == 0x3955);
  CHECK(reduce_bits(DataType::BFloat16, RedOp::Avg, thirds, 3) == 0x3F2B);
  const std::vector<int> twos(16, 2);
  CHECK(reduce_bits(DataType::Float16, RedOp::Prod, twos.data(), 16) == 0x7c00);
  CHECK(reduce_bits(DataType::Float8E4M3, RedOp::Avg, thirds, 3) == 0x33);         // 2/3 -> 0.6875
  CHECK(reduce_bits(DataType::Float8E5M2, RedOp::Avg, thirds, 3) == 0x39);         // 2/3 -> 0.625
  CHECK(reduce_bits(DataType::Float8E4M3, RedOp::Prod, twos.data(), 8) == 0x78);   // 256
  CHECK(reduce_bits(DataType::Float8E4M3, RedOp::Prod, twos.data(), 16) == 0x7e);  // saturated
  CHECK(reduce_bits(DataType::Float8E5M2, RedOp::Prod, twos.data(), 15) == 0x78);  // 2^15
  CHECK(reduce_bits(DataType::Float8E5M2, RedOp::Prod, twos.data(), 16) == 0x7c);  // inf
  CHECK(reduce_bits(DataType::Int8, RedOp::Prod, twos.data(), 7) == 0x80);
  CHECK(reduce_bits(DataType::Int8, RedOp::Prod, twos.data(), 8) == 0);
}

TEST_CASE("perf: fill and check agree and count a corrupted element", "[perf]") {
  const std::size_t count = Pattern::kPeriod + 1000;
  const std::size_t first = 12345;
  for (int t = 0; t < loom::kNumDataTypes; ++t) {
    for (int o = 0; o < loom::kNumRedOps; ++o) {
      if (!loom::supports(dtype_at(t), op_at(o))) continue;
      for (const int n : kRankCounts) {
        const Pattern p(dtype_at(t), op_at(o), n, n / 2);
        const std::size_t elem = p.elem_size();
        INFO("dtype " << t << " op " << o << " nranks " << n);
        std::vector<unsigned char> buf(count * elem);
        p.fill_reduced(buf.data(), count, first);
        int bad = 0;
        for (std::size_t i = 0; i < count; ++i) {
          bad += load(&buf[i * elem], elem) != p.reduced_bits(first + i);
        }
        CHECK(bad == 0);
        CHECK(p.check_reduced(buf.data(), count, first).wrong == 0);
        const std::size_t k = (count * 7) / 11;
        buf[k * elem + elem - 1] ^= 0x01;
        const Pattern::Mismatch m = p.check_reduced(buf.data(), count, first);
        CHECK(m.wrong == 1);
        CHECK(m.first == k);

        const int rank = n - 1;
        p.fill_input(buf.data(), count, rank, first);
        for (std::size_t i = 0; i < count; ++i) {
          bad += load(&buf[i * elem], elem) != p.input_bits(rank, first + i);
        }
        CHECK(bad == 0);
        CHECK(p.check_input(buf.data(), count, rank, first).wrong == 0);
        loom::perf::invert_bytes(&buf[3 * elem], 2 * elem);
        CHECK(p.check_input(buf.data(), count, rank, first).wrong == 2);
        CHECK(p.check_input(buf.data(), count, rank, first).first == 3);
      }
    }
  }
}

TEST_CASE("perf: inputs depend on rank, index and root", "[perf]") {
  for (const RedOp op : {RedOp::Sum, RedOp::Prod}) {
    const Pattern a(DataType::Float32, op, 8, 0);
    const Pattern b(DataType::Float32, op, 8, 3);
    int same_rank = 0;
    int same_root = 0;
    int same_index = 0;
    for (std::size_t i = 0; i < 1000; ++i) {
      same_rank += a.input_value(0, i) == a.input_value(1, i);
      same_root += a.input_value(2, i) == b.input_value(2, i);
      same_index += a.input_value(0, i) == a.input_value(0, i + 1);
    }
    CHECK(same_rank < 700);
    CHECK(same_root < 700);
    CHECK(same_index < 700);
  }
  // Sums stay exact in bf16 (<= 256) for large jobs too.
  for (const int n : {36, 64, 100, 256}) {
    const Pattern p(DataType::BFloat16, RedOp::Sum, n, 0);
    int worst = 0;
    for (std::size_t i = 0; i < 2000; ++i) {
      int sum = 0;
      for (int r = 0; r < n; ++r) sum += p.input_value(r, i);
      worst = std::max(worst, sum);
    }
    CHECK(worst <= 256);
  }
  // fp8: sums stay exact (<= 16 in e4m3, <= 8 in e5m2) for any rank count, and still vary.
  for (const auto& [t, limit] :
       {std::pair{DataType::Float8E4M3, 16}, std::pair{DataType::Float8E5M2, 8}}) {
    for (const int n : {2, 5, 8, 9, 16, 17, 64, 256}) {
      const Pattern p(t, RedOp::Sum, n, 1);
      int worst = 0;
      int nonzero = 0;
      for (std::size_t i = 0; i < Pattern::kPeriod; i += (n > 16 ? 1 : 37)) {
        int sum = 0;
        for (int r = 0; r < n; ++r) sum += p.input_value(r, i);
        worst = std::max(worst, sum);
        nonzero += sum > 0;
      }
      INFO("dtype " << static_cast<int>(t) << " nranks " << n);
      CHECK(worst <= limit);
      CHECK(nonzero > 0);
    }
  }
}

TEST_CASE("perf: fp8 conversions round to nearest even", "[perf]") {
  int bad = 0;
  for (std::uint32_t b = 0; b < 0x100; ++b) {
    const auto bits = static_cast<std::uint8_t>(b);
    const bool nan_e4 = (bits & 0x7f) == 0x7f;
    const bool nan_e5 = (bits & 0x7c) == 0x7c && (bits & 0x03) != 0;
    const float e4 = loom::perf::f8e4m3_to_float(bits);
    const float e5 = loom::perf::f8e5m2_to_float(bits);
    if (nan_e4 != std::isnan(e4) || nan_e5 != std::isnan(e5)) ++bad;
    if (!nan_e4 &&
        (loom::perf::float_to_f8e4m3(e4) != bits || e4 != ref_decode(DataType::Float8E4M3, b))) {
      ++bad;
    }
    if (!nan_e5 &&
        (loom::perf::float_to_f8e5m2(e5) != bits || e5 != ref_decode(DataType::Float8E5M2, b))) {
      ++bad;
    }
  }
  CHECK(bad == 0);
  CHECK(loom::perf::f8e4m3_to_float(0x7e) == 448.0f);
  CHECK(loom::perf::f8e5m2_to_float(0x7b) == 57344.0f);

  std::mt19937_64 rng(8);
  std::vector<float> samples = {0.0f,
                                -0.0f,
                                448.0f,
                                464.0f,
                                480.0f,
                                1e6f,
                                57344.0f,
                                61439.99f,
                                61440.0f,
                                0x1p-9f,
                                0x1p-10f,
                                0x3p-10f,
                                0x1p-16f,
                                0x1p-17f,
                                0x3p-17f,
                                0x7p-17f,
                                -500.0f,
                                std::numeric_limits<float>::max(),
                                std::numeric_limits<float>::infinity(),
                                -std::numeric_limits<float>::infinity()};
  for (int i = 0; i < 100000; ++i) {
    // Random signs, exponents around the fp8 ranges, random mantissas.
    const auto r = static_cast<std::uint32_t>(rng());
    const std::uint32_t exp = 127 - 20 + (r >> 24) % 40;
    samples.push_back(std::bit_cast<float>((r & 0x807fffffU) | (exp << 23)));
  }
  for (const float x : samples) {
    bad += loom::perf::float_to_f8e4m3(x) != ref_round(ref_e4m3(), x);
    bad += loom::perf::float_to_f8e5m2(x) != ref_round(ref_e5m2(), x);
  }
  CHECK(bad == 0);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(loom::perf::float_to_f8e4m3(nan) == 0x7f);
  CHECK(loom::perf::float_to_f8e5m2(-nan) == 0xfe);
}
