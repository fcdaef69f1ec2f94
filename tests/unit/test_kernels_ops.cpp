// The reduction ops beyond the arithmetic five: supports(), the bitwise ops and PreMulSum's
// scale step in the host kernels, exact for every dtype, against references that share no code
// with the kernels (uint64 bit arithmetic; a double-precision ilogb/ldexp/nearbyint rounder).
#include <array>
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/host/reduce.hpp"

namespace {

using loom::DataType;
using loom::RedOp;
namespace k = loom::kernels;

constexpr std::array<DataType, 6> kIntTypes = {DataType::Int8,   DataType::Uint8, DataType::Int32,
                                               DataType::Uint32, DataType::Int64, DataType::Uint64};
constexpr std::array<DataType, 6> kFloatTypes = {DataType::Float16,    DataType::BFloat16,
                                                 DataType::Float32,    DataType::Float64,
                                                 DataType::Float8E4M3, DataType::Float8E5M2};
constexpr std::array<RedOp, 3> kBitOps = {RedOp::BitAnd, RedOp::BitOr, RedOp::BitXor};
constexpr std::array<std::size_t, 7> kOpCounts = {1, 7, 8, 9, 33, 1000, 4099};

using Rng = std::mt19937_64;

/// count elements of dtype t, as raw bytes: every bit pattern.
std::vector<std::uint8_t> random_bytes(DataType t, std::size_t count, Rng& rng) {
  std::vector<std::uint8_t> v(count * loom::dtype_size(t));
  for (auto& b : v) b = static_cast<std::uint8_t>(rng());
  return v;
}

std::uint64_t get(DataType t, const std::vector<std::uint8_t>& v, std::size_t i) {
  std::uint64_t x = 0;
  std::memcpy(&x, v.data() + i * loom::dtype_size(t), loom::dtype_size(t));  // little-endian
  return x;
}

std::uint64_t ref_bitop(RedOp op, std::uint64_t a, std::uint64_t b) {
  return op == RedOp::BitAnd ? (a & b) : op == RedOp::BitOr ? (a | b) : (a ^ b);
}

// ---- Reference rounding of an exact double to a narrow float format. ----

struct NarrowFormat {
  int mant_bits;   // stored fraction bits
  int emin;        // exponent of the smallest normal
  double max;      // largest finite value
  bool saturates;  // fp8 e4m3: overflow gives +-max instead of infinity
};
constexpr NarrowFormat kNarrowHalf{10, -14, 65504.0, false};
constexpr NarrowFormat kNarrowBf16{7, -126, 0x1.fep127, false};
constexpr NarrowFormat kNarrowE4M3{3, -6, 448.0, true};
constexpr NarrowFormat kNarrowE5M2{2, -14, 57344.0, false};

/// p rounded to the format, nearest even (nearbyint in the default rounding mode), as a double.
double narrow_round(double p, const NarrowFormat& f) {
  if (p == 0 || !std::isfinite(p)) return p;
  const int e = std::max(std::ilogb(p), f.emin);
  const double q = std::ldexp(std::nearbyint(std::ldexp(p, f.mant_bits - e)), e - f.mant_bits);
  if (std::fabs(q) > f.max) {
    const double big = f.saturates ? f.max : std::numeric_limits<double>::infinity();
    return std::copysign(big, p);
  }
  return q;
}

/// One element of a 16-bit or 8-bit float type: decode, encode (exact for representable values).
double decode(DataType t, std::uint32_t bits) {
  switch (t) {
    case DataType::Float16: return k::half_to_float(static_cast<std::uint16_t>(bits));
    case DataType::BFloat16: return k::bfloat16_to_float(static_cast<std::uint16_t>(bits));
    case DataType::Float8E4M3: return k::fp8_e4m3_to_float(static_cast<std::uint8_t>(bits));
    default: return k::fp8_e5m2_to_float(static_cast<std::uint8_t>(bits));
  }
}
std::uint32_t encode(DataType t, double v) {
  const auto f = static_cast<float>(v);
  switch (t) {
    case DataType::Float16: return k::float_to_half(f);
    case DataType::BFloat16: return k::float_to_bfloat16(f);
    case DataType::Float8E4M3: return k::float_to_fp8_e4m3(f);
    default: return k::float_to_fp8_e5m2(f);
  }
}
const NarrowFormat& narrow_format_of(DataType t) {
  return t == DataType::Float16      ? kNarrowHalf
         : t == DataType::BFloat16   ? kNarrowBf16
         : t == DataType::Float8E4M3 ? kNarrowE4M3
                                     : kNarrowE5M2;
}

/// Scalars whose products with most inputs are inexact (so rounding is exercised), both signs.
constexpr std::array<double, 8> kScalars = {1.0 / 3, 0.1,  1.1,    -2.7,
                                            3.0 / 7, 1e-3, 1000.5, -0.9999};

}  // namespace

TEST_CASE("redops: supports() allows bitwise ops for integer types only", "[kernels][redops]") {
  for (DataType t : kIntTypes) {
    for (int o = 0; o < loom::kNumRedOps; ++o) CHECK(loom::supports(t, static_cast<RedOp>(o)));
  }
  for (DataType t : kFloatTypes) {
    for (RedOp op : {RedOp::Sum, RedOp::Prod, RedOp::Min, RedOp::Max, RedOp::Avg, RedOp::PreMulSum})
      CHECK(loom::supports(t, op));
    for (RedOp op : kBitOps) CHECK_FALSE(loom::supports(t, op));
  }
  CHECK_FALSE(loom::supports(static_cast<DataType>(12), RedOp::Sum));
  CHECK_FALSE(loom::supports(DataType::Int32, static_cast<RedOp>(loom::kNumRedOps)));
  CHECK(loom::to_string(RedOp::PreMulSum) == "premul_sum");
  CHECK(loom::to_string(RedOp::BitXor) == "bxor");
  CHECK(loom::parse_redop("BAND") == RedOp::BitAnd);
  CHECK(loom::parse_redop("bit_or") == RedOp::BitOr);
  CHECK(loom::parse_redop("premulsum") == RedOp::PreMulSum);
  CHECK_FALSE(loom::parse_redop("nand").has_value());
}

TEST_CASE("redops: bitwise ops are exact for every integer type, size and aliasing",
          "[kernels][redops]") {
  Rng rng(2024);
  for (DataType t : kIntTypes) {
    for (RedOp op : kBitOps) {
      for (std::size_t n : kOpCounts) {
        INFO(loom::to_string(t) << " " << loom::to_string(op) << " count " << n);
        const auto a = random_bytes(t, n, rng), b = random_bytes(t, n, rng);
        std::vector<std::uint8_t> out(a.size()), in_a = a, in_b = b;
        k::reduce(t, op, out.data(), a.data(), b.data(), n);
        k::reduce(t, op, in_a.data(), in_a.data(), b.data(), n);  // dst == a
        k::reduce(t, op, in_b.data(), a.data(), in_b.data(), n);  // dst == b
        std::size_t bad = 0;
        for (std::size_t i = 0; i < n; ++i) {
          const std::uint64_t want = ref_bitop(op, get(t, a, i), get(t, b, i));
          bad += (get(t, out, i) != want) + (get(t, in_a, i) != want) + (get(t, in_b, i) != want);
        }
        CHECK(bad == 0);
        // reduce_n over three sources equals the two-step fold.
        const auto c = random_bytes(t, n, rng);
        const void* srcs[] = {a.data(), b.data(), c.data()};
        std::vector<std::uint8_t> folded(a.size());
        k::reduce_n(t, op, folded.data(), srcs, 3, n);
        for (std::size_t i = 0; i < n; ++i)
          bad += get(t, folded, i) !=
                 ref_bitop(op, ref_bitop(op, get(t, a, i), get(t, b, i)), get(t, c, i));
        CHECK(bad == 0);
      }
    }
  }
}

TEST_CASE("redops: a bitwise op on a floating type leaves dst untouched", "[kernels][redops]") {
  for (DataType t : kFloatTypes) {
    std::vector<std::uint8_t> a(64 * loom::dtype_size(t), 0x3c), dst(a.size(), 0x11);
    k::reduce(t, RedOp::BitXor, dst.data(), a.data(), a.data(), 64);
    const void* srcs[] = {a.data(), a.data()};
    k::reduce_n(t, RedOp::BitOr, dst.data(), srcs, 2, 64);
    CHECK(dst == std::vector<std::uint8_t>(a.size(), 0x11));
  }
}

TEST_CASE("redops: PreMulSum reduces exactly as Sum for every type", "[kernels][redops]") {
  Rng rng(7);
  for (int ti = 0; ti < loom::kNumDataTypes; ++ti) {
    const auto t = static_cast<DataType>(ti);
    const auto a = random_bytes(t, 1000, rng), b = random_bytes(t, 1000, rng);
    std::vector<std::uint8_t> sum(a.size()), pre(a.size());
    k::reduce(t, RedOp::Sum, sum.data(), a.data(), b.data(), 1000);
    k::reduce(t, RedOp::PreMulSum, pre.data(), a.data(), b.data(), 1000);
    INFO(loom::to_string(t));
    CHECK(sum == pre);
  }
}

namespace {

/// The integer factor, as a two's complement pattern: trunc(s) clamped to t's range, NaN 0.
std::uint64_t ref_factor(DataType t, double s) {
  const int bits = static_cast<int>(8 * loom::dtype_size(t));
  const bool sgn = t == DataType::Int8 || t == DataType::Int32 || t == DataType::Int64;
  const double lo = sgn ? -std::ldexp(1.0, bits - 1) : 0.0;
  const double hi_excl = std::ldexp(1.0, sgn ? bits - 1 : bits);
  if (std::isnan(s)) return 0;
  const double tr = std::trunc(s);
  if (tr <= lo) return sgn ? std::uint64_t{1} << (bits - 1) : 0;                  // min
  if (tr >= hi_excl) return (~std::uint64_t{0} >> (64 - bits)) >> (sgn ? 1 : 0);  // max
  return tr < 0 ? static_cast<std::uint64_t>(static_cast<std::int64_t>(tr))
                : static_cast<std::uint64_t>(tr);
}

}  // namespace

TEST_CASE("redops: scale multiplies integers exactly in their type, wrapping",
          "[kernels][redops]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Rng rng(11);
  for (DataType t : kIntTypes) {
    const std::uint64_t mask = ~std::uint64_t{0} >> (64 - 8 * loom::dtype_size(t));
    for (double s : {3.0, -2.9, 0.0, 1.0, 255.0, 1e30, -1e30, nan, 9.3e18, -9.3e18}) {
      for (std::size_t n : kOpCounts) {
        INFO(loom::to_string(t) << " scalar " << s << " count " << n);
        const auto x = random_bytes(t, n, rng);
        std::vector<std::uint8_t> out(x.size()), inplace = x;
        k::scale(t, out.data(), x.data(), n, s);
        k::scale(t, inplace.data(), inplace.data(), n, s);
        const std::uint64_t f = ref_factor(t, s);
        std::size_t bad = 0;
        for (std::size_t i = 0; i < n; ++i) {
          const std::uint64_t want = (get(t, x, i) * f) & mask;  // the low bits of any product
          bad += (get(t, out, i) != want) + (get(t, inplace, i) != want);
        }
        CHECK(bad == 0);
      }
    }
  }
  // Spot values: the factor truncates toward zero and clamps.
  std::int8_t v[] = {100, -7, 1};
  k::scale(DataType::Int8, v, v, 3, 3.9);  // x3, wrapping: 300 -> 44
  CHECK((v[0] == 44 && v[1] == -21 && v[2] == 3));
  std::uint8_t u[] = {5};
  k::scale(DataType::Uint8, u, u, 1, -4.0);  // clamped to 0
  CHECK(u[0] == 0);
  std::int64_t w[] = {1, -1};
  k::scale(DataType::Int64, w, w, 2, 1e300);  // clamped to INT64_MAX
  CHECK((w[0] == std::numeric_limits<std::int64_t>::max() && w[1] == -w[0]));
}

TEST_CASE("redops: scale rounds fp16/bf16/fp8 products once, for every input pattern",
          "[kernels][redops]") {
  for (DataType t :
       {DataType::Float16, DataType::BFloat16, DataType::Float8E4M3, DataType::Float8E5M2}) {
    const std::size_t w = loom::dtype_size(t);
    const std::uint32_t ncodes = w == 2 ? 65536 : 256;
    std::vector<std::uint8_t> x(ncodes * w), out(x.size());
    for (std::uint32_t c = 0; c < ncodes; ++c) std::memcpy(x.data() + c * w, &c, w);
    std::size_t bad = 0, twice_differs = 0;
    for (double s : kScalars) {
      k::scale(t, out.data(), x.data(), ncodes, s);
      const double fs = static_cast<float>(s);  // the scalar as the kernel applies it
      for (std::uint32_t c = 0; c < ncodes; ++c) {
        const double xv = decode(t, c);
        std::uint32_t got = 0;
        std::memcpy(&got, out.data() + c * w, w);
        if (std::isnan(xv)) {
          bad += !std::isnan(decode(t, got));
          continue;
        }
        const double exact = xv * fs;  // exact: at most 11 x 24 significant bits
        const std::uint32_t want = encode(t, narrow_round(exact, narrow_format_of(t)));
        bad += got != want;
        if (std::isfinite(exact))  // rounding to fp32 first, then to the type: sometimes wrong
          twice_differs += encode(t, static_cast<float>(exact)) != want;
      }
    }
    INFO(loom::to_string(t) << ": " << bad << " wrong, rounding twice differs in "
                            << twice_differs);
    CHECK(bad == 0);
    if (t == DataType::Float16 || t == DataType::BFloat16) CHECK(twice_differs > 0);
  }
}

TEST_CASE("redops: scale of fp32 multiplies by the fp32 scalar, fp64 by the double",
          "[kernels][redops]") {
  Rng rng(5);
  std::uniform_real_distribution<double> real(-1e6, 1e6);
  std::vector<float> xf(999), of(999);
  std::vector<double> xd(999), od(999);
  for (std::size_t i = 0; i < xf.size(); ++i) xd[i] = real(rng), xf[i] = static_cast<float>(xd[i]);
  std::size_t bad = 0, f32_differs = 0;
  for (double s : kScalars) {
    k::scale(DataType::Float32, of.data(), xf.data(), xf.size(), s);
    k::scale(DataType::Float64, od.data(), xd.data(), xd.size(), s);
    for (std::size_t i = 0; i < xf.size(); ++i) {
      bad += of[i] != xf[i] * static_cast<float>(s);
      bad += od[i] != xd[i] * s;
      f32_differs += od[i] != xd[i] * static_cast<double>(static_cast<float>(s));
    }
  }
  CHECK(bad == 0);
  CHECK(f32_differs > 0);  // fp64 did not round the scalar to fp32
  float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  float special[] = {inf, -0.0f, nan};
  k::scale(DataType::Float32, special, special, 3, -2.0);
  CHECK((special[0] == -inf && special[1] == 0.0f && !std::signbit(special[1]) &&
         std::isnan(special[2])));
}

namespace {

/// Stores v (representable in t) as element i of buf, for any floating type t.
void put_float(DataType t, std::vector<std::uint8_t>& buf, std::size_t i, double v) {
  const std::size_t w = loom::dtype_size(t);
  if (t == DataType::Float64) {
    std::memcpy(buf.data() + i * w, &v, w);
  } else if (t == DataType::Float32) {
    const auto f = static_cast<float>(v);
    std::memcpy(buf.data() + i * w, &f, w);
  } else {
    const std::uint32_t e = encode(t, v);
    std::memcpy(buf.data() + i * w, &e, w);
  }
}

/// Element i of buf as a double, for any floating type t.
double get_float(DataType t, const std::vector<std::uint8_t>& buf, std::size_t i) {
  if (t == DataType::Float64) return reinterpret_cast<const double*>(buf.data())[i];
  if (t == DataType::Float32) return reinterpret_cast<const float*>(buf.data())[i];
  return decode(t, static_cast<std::uint32_t>(get(t, buf, i)));
}

}  // namespace

TEST_CASE("redops: PreMulSum as scale then Sum is exact for every type", "[kernels][redops]") {
  // Three "ranks" with their own scalars. Floating types: inputs in {-1, 0, 1} and scalars
  // 1, 0.5, -0.25: every partial sum is a multiple of 0.25 below 2, exact even in fp8 e5m2.
  // Integer types: any bit patterns and scalars 3, 2, 5, wrapping.
  Rng rng(99);
  constexpr std::size_t n = 1031;
  for (int ti = 0; ti < loom::kNumDataTypes; ++ti) {
    const auto t = static_cast<DataType>(ti);
    const bool fl = loom::is_floating(t);
    const std::array<double, 3> scalars =
        fl ? std::array<double, 3>{1.0, 0.5, -0.25} : std::array<double, 3>{3.0, 2.0, 5.0};
    std::array<std::vector<std::uint8_t>, 3> in, scaled;
    for (std::size_t r = 0; r < 3; ++r) {
      in[r] = random_bytes(t, n, rng);
      for (std::size_t i = 0; fl && i < n; ++i)
        put_float(t, in[r], i, static_cast<double>(static_cast<int>(rng() % 3) - 1));
      scaled[r].resize(in[r].size());
      k::scale(t, scaled[r].data(), in[r].data(), n, scalars[r]);
    }
    const void* srcs[] = {scaled[0].data(), scaled[1].data(), scaled[2].data()};
    std::vector<std::uint8_t> out(in[0].size());
    k::reduce_n(t, RedOp::PreMulSum, out.data(), srcs, 3, n);
    std::size_t bad = 0;
    const std::uint64_t mask = ~std::uint64_t{0} >> (64 - 8 * loom::dtype_size(t));
    for (std::size_t i = 0; i < n; ++i) {
      if (fl) {
        const double want =
            get_float(t, in[0], i) + get_float(t, in[1], i) * 0.5 - get_float(t, in[2], i) * 0.25;
        bad += get_float(t, out, i) != want;
      } else {
        const std::uint64_t want =
            (get(t, in[0], i) * 3 + get(t, in[1], i) * 2 + get(t, in[2], i) * 5) & mask;
        bad += get(t, out, i) != want;
      }
    }
    INFO(loom::to_string(t));
    CHECK(bad == 0);
  }
}
