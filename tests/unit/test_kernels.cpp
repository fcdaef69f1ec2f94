// Host reduction kernels against an independent scalar reference.
//
// The reference works on raw bit patterns: integers wrap modulo 2^width through uint64
// arithmetic, floating types are decoded to double, combined exactly (or with an innocuous
// double rounding, see ref_float_op), and re-rounded with a slow ilogb/ldexp/nearbyint rounder
// that shares no code with the kernels.
#include <array>
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/host/reduce.hpp"

namespace {

using loom::DataType;
using loom::RedOp;
namespace k = loom::kernels;

constexpr std::array<DataType, 12> kAllTypes = {
    DataType::Int8,    DataType::Uint8,   DataType::Int32,      DataType::Uint32,
    DataType::Int64,   DataType::Uint64,  DataType::Float16,    DataType::BFloat16,
    DataType::Float32, DataType::Float64, DataType::Float8E4M3, DataType::Float8E5M2};
constexpr std::array<RedOp, 5> kAllOps = {RedOp::Sum, RedOp::Prod, RedOp::Min, RedOp::Max,
                                          RedOp::Avg};
constexpr std::array<std::size_t, 8> kCounts = {0, 1, 7, 8, 9, 33, 1000, 4099};

constexpr std::array<const char*, 12> kTypeNames = {"int8",  "uint8",  "int32",  "uint32",
                                                    "int64", "uint64", "fp16",   "bf16",
                                                    "fp32",  "fp64",   "f8e4m3", "f8e5m2"};
constexpr std::array<const char*, 5> kOpNames = {"sum", "prod", "min", "max", "avg"};
constexpr auto tname = [](DataType t) { return kTypeNames[static_cast<int>(t)]; };
constexpr auto oname = [](RedOp op) { return kOpNames[static_cast<int>(op)]; };

// Small helpers (lambdas so that they stay one line each).
constexpr auto width = [](DataType t) { return loom::dtype_size(t); };
constexpr auto is_signed_int = [](DataType t) {
  return t == DataType::Int8 || t == DataType::Int32 || t == DataType::Int64;
};
constexpr auto width_mask = [](DataType t) { return ~std::uint64_t{0} >> (64 - 8 * width(t)); };
constexpr auto fbits = [](float f) { return std::bit_cast<std::uint32_t>(f); };
constexpr auto from_bits = [](std::uint32_t b) { return std::bit_cast<float>(b); };

using Rng = std::mt19937_64;  // fully specified by the standard: same sequence everywhere

struct Format {
  int mant_bits, exp_bits, emax;  // stored fraction bits, exponent bits, bias (= max exponent)
  // "Finite" formats (fp8 e4m3): no infinity, only the all-ones pattern is NaN, so the top
  // exponent field holds normal numbers (max exponent emax + 1), and overflow saturates.
  bool finite = false;
  int emin() const { return 1 - emax; }
};
constexpr Format kHalf{10, 5, 15};
constexpr Format kBf16{7, 8, 127};
constexpr Format kF32{23, 8, 127};
constexpr Format kF64{52, 11, 1023};
constexpr Format kE4M3{3, 4, 7, true};
constexpr Format kE5M2{2, 5, 15};

const auto sign_bit = [](Format f) { return std::uint64_t{1} << (f.mant_bits + f.exp_bits); };
/// 65504 for fp16, 448 for e4m3, 57344 for e5m2, ...
double max_finite(Format f) {
  return f.finite ? std::ldexp(2.0 - std::ldexp(1.0, 1 - f.mant_bits), f.emax + 1)
                  : std::ldexp(2.0 - std::ldexp(1.0, -f.mant_bits), f.emax);
}

/// Rounds x to the nearest value of `fmt` (ties to even), with gradual underflow and overflow to
/// infinity (finite formats: saturation to the largest finite value, infinities included).
/// Returns a double that is exactly representable in `fmt` (or inf/NaN).
double ref_round(double x, Format fmt) {
  if (std::isnan(x) || x == 0) return x;
  if (std::isinf(x)) return fmt.finite ? std::copysign(max_finite(fmt), x) : x;
  const double mag = std::fabs(x);
  const int exponent = std::max(std::ilogb(mag), fmt.emin());  // of the target's ulp grid
  const double ulp = std::ldexp(1.0, exponent - fmt.mant_bits);
  double r = std::nearbyint(mag / ulp) * ulp;  // default rounding mode: nearest, ties to even
  if (r > max_finite(fmt))
    r = fmt.finite ? max_finite(fmt) : std::numeric_limits<double>::infinity();
  return std::copysign(r, x);
}

double ref_decode(std::uint64_t bits, Format fmt) {
  const std::uint64_t mant = bits & ((std::uint64_t{1} << fmt.mant_bits) - 1);
  const int field = static_cast<int>((bits >> fmt.mant_bits) & ((1u << fmt.exp_bits) - 1));
  const int max_field = (1 << fmt.exp_bits) - 1;
  const std::uint64_t max_mant = (std::uint64_t{1} << fmt.mant_bits) - 1;
  const auto sig =
      static_cast<double>(field == 0 ? mant : mant | std::uint64_t{1} << fmt.mant_bits);
  const bool finite = field < max_field || (fmt.finite && mant < max_mant);
  const double v = finite ? std::ldexp(sig, std::max(field, 1) - fmt.emax - fmt.mant_bits)
                   : mant == 0 && !fmt.finite ? std::numeric_limits<double>::infinity()
                                              : std::numeric_limits<double>::quiet_NaN();
  return (bits & sign_bit(fmt)) != 0 ? -v : v;
}

/// Encodes a value already representable in `fmt` (not NaN).
std::uint64_t ref_encode(double v, Format fmt) {
  const std::uint64_t sign = std::signbit(v) ? sign_bit(fmt) : 0;
  const double mag = std::fabs(v);
  if (std::isinf(mag)) return sign | (((std::uint64_t{1} << fmt.exp_bits) - 1) << fmt.mant_bits);
  if (mag == 0) return sign;
  const int exponent = std::ilogb(mag);
  if (exponent < fmt.emin()) {  // subnormal
    return sign | static_cast<std::uint64_t>(std::ldexp(mag, fmt.mant_bits - fmt.emin()));
  }
  // The implicit leading 1 of the significand increments the biased exponent field by one.
  const auto sig = static_cast<std::uint64_t>(std::ldexp(mag, fmt.mant_bits - exponent));
  return sign + (static_cast<std::uint64_t>(exponent + fmt.emax - 1) << fmt.mant_bits) + sig;
}

Format format_of(DataType t) {
  if (t == DataType::Float16) return kHalf;
  if (t == DataType::Float8E4M3) return kE4M3;
  if (t == DataType::Float8E5M2) return kE5M2;
  return t == DataType::BFloat16 ? kBf16 : t == DataType::Float32 ? kF32 : kF64;
}
const auto ref_to_double = [](DataType t, std::uint64_t b) { return ref_decode(b, format_of(t)); };
/// A quiet NaN with the given sign and payload (finite formats: their one NaN of that sign).
std::uint64_t qnan(Format f, bool neg, std::uint64_t payload) {
  if (f.finite) return (sign_bit(f) - 1) | (neg ? sign_bit(f) : 0);
  const std::uint64_t inf = ((std::uint64_t{1} << f.exp_bits) - 1) << f.mant_bits;
  return inf | (std::uint64_t{1} << (f.mant_bits - 1)) | payload | (neg ? sign_bit(f) : 0);
}

struct Expected {
  std::uint64_t bits;
  bool nan;  // any NaN is accepted (payloads of NaNs created by arithmetic are not specified)
};

/// Two's complement value of `bits` widened to 64 bits (sign-extended for signed types).
std::uint64_t widen_int(DataType t, std::uint64_t bits) {
  const std::size_t w = 8 * width(t);
  if (!is_signed_int(t) || w == 64) return bits;
  const std::uint64_t sign = std::uint64_t{1} << (w - 1);
  return (bits ^ sign) - sign;
}

std::uint64_t ref_int_op(DataType t, RedOp op, std::uint64_t a, std::uint64_t b) {
  const std::uint64_t wa = widen_int(t, a);
  const std::uint64_t wb = widen_int(t, b);
  const bool b_less =
      is_signed_int(t) ? static_cast<std::int64_t>(wb) < static_cast<std::int64_t>(wa) : wb < wa;
  std::uint64_t r = 0;
  switch (op) {
    case RedOp::Sum:
    case RedOp::Avg:
    case RedOp::PreMulSum: r = wa + wb; break;  // modulo 2^64, then truncated: modulo 2^width
    case RedOp::Prod: r = wa * wb; break;
    case RedOp::Min: r = b_less ? wb : wa; break;
    case RedOp::Max: r = (b_less || wa == wb) ? wa : wb; break;
    case RedOp::BitAnd: r = wa & wb; break;  // test_kernels_ops.cpp tests these
    case RedOp::BitOr: r = wa | wb; break;
    case RedOp::BitXor: r = wa ^ wb; break;
  }
  return r & width_mask(t);
}

std::uint64_t quiet_nan_bits(DataType t, std::uint64_t nan) {
  const Format f = format_of(t);
  return t == DataType::Float32 || t == DataType::Float64 ? nan : nan | qnan(f, false, 0);
}

/// fp16/bf16/fp8/fp32: the double result is exact for Sum/Prod of fp16/fp8 and for Prod of
/// fp32/bf16; otherwise double has >= 2p+2 bits, so rounding it again to the p-bit format is
/// innocuous and the result is the correctly rounded one, as computed by the kernels. fp64: plain
/// double arithmetic.
Expected ref_float_op(DataType t, RedOp op, std::uint64_t a, std::uint64_t b) {
  const double x = ref_to_double(t, a);
  const double y = ref_to_double(t, b);
  if (op == RedOp::Min || op == RedOp::Max) {
    // Documented kernel semantics: NaN propagates (a's NaN if both are NaN; the 8/16-bit types
    // return it quiet, since they go through fp32), else std::min/max.
    if (std::isnan(x)) return {quiet_nan_bits(t, a), false};
    if (std::isnan(y)) return {quiet_nan_bits(t, b), false};
    const bool pick_b = op == RedOp::Min ? y < x : x < y;
    return {pick_b ? b : a, false};
  }
  const double r = ref_round(op == RedOp::Prod ? x * y : x + y, format_of(t));
  if (std::isnan(r)) return {0, true};
  return {ref_encode(r, format_of(t)), false};
}

Expected ref_op(DataType t, RedOp op, std::uint64_t a, std::uint64_t b) {
  return loom::is_floating(t) ? ref_float_op(t, op, a, b)
                              : Expected{ref_int_op(t, op, a, b), false};
}

const auto is_nan_bits = [](DataType t, std::uint64_t bits) {
  return loom::is_floating(t) && std::isnan(ref_to_double(t, bits));
};
/// Bit-identical, except that any two NaNs are equal: when both operands of an arithmetic op are
/// NaN, IEEE 754 leaves the result's payload (and x86 the sign) to the instruction's operand
/// order, which the compiler may choose differently in the vector and scalar loops.
const auto same_result = [](DataType t, std::uint64_t x, std::uint64_t y) {
  return x == y || (is_nan_bits(t, x) && is_nan_bits(t, y));
};
const auto matches = [](DataType t, const Expected& e, std::uint64_t actual) {
  return e.nan ? is_nan_bits(t, actual) : e.bits == actual;
};

static_assert(std::endian::native == std::endian::little, "Buffer copies the low bytes");

/// `count` elements at an offset of `offset` elements from an aligned start (operator new
/// storage), with one canary element on each side.
class Buffer {
 public:
  Buffer(DataType t, std::size_t count, std::size_t offset)
      : w_(width(t)), first_(offset + 1), count_(count), bytes_((count + offset + 2) * w_, 0xa5) {}
  void* data() { return bytes_.data() + first_ * w_; }
  std::uint64_t get(std::size_t i) const { return raw(first_ + i); }
  void set(std::size_t i, std::uint64_t v) { std::memcpy(&bytes_[(first_ + i) * w_], &v, w_); }
  bool canaries_intact() const {
    const std::uint64_t canary = 0xa5a5a5a5a5a5a5a5ull >> (64 - 8 * w_);  // 0xa5 bytes
    return raw(first_ - 1) == canary && raw(first_ + count_) == canary;
  }

 private:
  std::uint64_t raw(std::size_t slot) const {
    std::uint64_t v = 0;
    std::memcpy(&v, &bytes_[slot * w_], w_);
    return v;
  }
  std::size_t w_, first_, count_;
  std::vector<unsigned char> bytes_;
};

/// Special floating values: +-0, +-inf (+-max for finite formats), a quiet NaN of each sign
/// (with a payload), the smallest subnormal and the largest finite value.
std::uint64_t special_element(DataType t, std::uint64_t pick) {
  const Format f = format_of(t);
  const bool neg = (pick & 8) != 0;
  if (pick % 5 == 4) return qnan(f, neg, 1);
  const std::array<double, 4> values = {0.0, std::numeric_limits<double>::infinity(),
                                        std::ldexp(1.0, f.emin() - f.mant_bits), max_finite(f)};
  return ref_encode(ref_round(neg ? -values[pick % 5] : values[pick % 5], f), f);
}

/// Random element: for floats, 1/8 special values, 1/8 raw bit patterns (inf, NaN, subnormals,
/// huge, tiny), 3/4 values of magnitude in [2^-4, 2^4) so that sums and products round in
/// interesting ways.
std::uint64_t random_element(DataType t, Rng& rng) {
  const std::uint64_t r = rng();
  if (!loom::is_floating(t) || r % 8 == 0) return rng() & width_mask(t);
  if (r % 8 == 1) return special_element(t, rng());
  const double unit = static_cast<double>(r >> 11) * 0x1p-53;  // [0, 1)
  const int exponent = static_cast<int>(rng() % 9) - 4;
  const double v = std::ldexp(2 * unit - 1, exponent);
  return ref_encode(ref_round(v, format_of(t)), format_of(t));
}

void fill_random(Buffer& buf, DataType t, std::size_t count, Rng& rng) {
  for (std::size_t i = 0; i < count; ++i) buf.set(i, random_element(t, rng));
}

enum class Alias { None, DstIsA, DstIsB, All };

/// Runs reduce() for one configuration; returns the number of wrong elements (canary damage
/// counts as one more).
std::size_t run_reduce_case(DataType t, RedOp op, std::size_t count, Alias alias,
                            std::size_t offset, Rng& rng) {
  Buffer a(t, count, offset);
  Buffer b(t, count, (offset + 1) % 2);  // b misaligned relative to a
  Buffer out(t, count, offset);
  fill_random(a, t, count, rng);
  fill_random(b, t, count, rng);
  Buffer* dst = &out;
  const void* pa = a.data();
  const void* pb = b.data();
  std::vector<Expected> want(count);
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint64_t bi = alias == Alias::All ? a.get(i) : b.get(i);
    want[i] = ref_op(t, op, a.get(i), bi);
  }
  if (alias == Alias::DstIsA || alias == Alias::All) dst = &a;
  if (alias == Alias::DstIsB) dst = &b;
  if (alias == Alias::All) pb = a.data();
  k::reduce(t, op, dst->data(), pa, pb, count);
  std::size_t bad = dst->canaries_intact() ? 0 : 1;
  for (std::size_t i = 0; i < count; ++i) bad += matches(t, want[i], dst->get(i)) ? 0 : 1;
  return bad;
}

Expected ref_avg(DataType t, std::uint64_t x, int n) {
  if (!loom::is_floating(t)) {
    const std::uint64_t w = widen_int(t, x);
    const std::uint64_t q = is_signed_int(t)
                                ? static_cast<std::uint64_t>(static_cast<std::int64_t>(w) / n)
                                : w / static_cast<std::uint64_t>(n);
    return {q & width_mask(t), false};
  }
  const double v = ref_to_double(t, x);
  if (std::isnan(v)) return {0, true};
  // Spec: fp64 in double; others computed in fp32 (double rounding through double is innocuous
  // for a division), then rounded to the 16-bit format.
  const double q = t == DataType::Float64 ? v / n : ref_round(v / n, kF32);
  return {ref_encode(ref_round(q, format_of(t)), format_of(t)), false};
}

}  // namespace

TEST_CASE("kernels: reduce matches the scalar reference for every dtype x op", "[kernels]") {
  Rng rng(42);
  for (DataType t : kAllTypes) {
    for (RedOp op : kAllOps) {
      for (std::size_t count : kCounts) {
        for (Alias alias : {Alias::None, Alias::DstIsA, Alias::DstIsB, Alias::All}) {
          for (std::size_t offset : {0, 1}) {
            INFO(tname(t) << " " << oname(op) << " count=" << count
                          << " alias=" << static_cast<int>(alias) << " offset=" << offset);
            REQUIRE(run_reduce_case(t, op, count, alias, offset, rng) == 0);
          }
        }
      }
    }
  }
}

TEST_CASE("kernels: integer arithmetic wraps around", "[kernels]") {
  // (dtype, op, a, b, a op b): two's complement values, truncated to the element width.
  using Case = std::tuple<DataType, RedOp, std::int64_t, std::int64_t, std::int64_t>;
  constexpr std::int64_t kMin64 = std::numeric_limits<std::int64_t>::min();
  constexpr std::int64_t kMax32 = std::numeric_limits<std::int32_t>::max();
  using enum DataType;
  using enum RedOp;
  // clang-format off
  const Case cases[] = {
      {Int8, Sum, 127, 1, -128}, {Int8, Sum, -128, -1, 127}, {Int8, Prod, -128, -1, -128},
      {Int8, Prod, 16, 16, 0}, {Uint8, Sum, 255, 1, 0}, {Uint8, Prod, 200, 2, 144},
      {Uint8, Prod, 255, 255, 1}, {Int32, Sum, kMax32, 1, -kMax32 - 1},
      {Int32, Prod, -kMax32 - 1, -1, -kMax32 - 1}, {Uint32, Prod, 1ll << 31, 2, 0},
      {Int64, Sum, -(kMin64 + 1), 1, kMin64}, {Int64, Prod, kMin64, -1, kMin64},
      {Uint64, Sum, -1, 2, 1}, {Int8, Min, -1, 1, -1}, {Uint8, Min, 255, 1, 1},
      {Int64, Max, kMin64, -1, -1}, {Uint64, Max, -1, 1, -1}, {Uint32, Max, -1, 1, -1}};
  // clang-format on
  for (const auto& [t, op, x, y, want] : cases) {
    Buffer a(t, 1, 0), b(t, 1, 0), out(t, 1, 0);
    a.set(0, static_cast<std::uint64_t>(x));
    b.set(0, static_cast<std::uint64_t>(y));
    k::reduce(t, op, out.data(), a.data(), b.data(), 1);
    INFO(tname(t) << " " << oname(op) << " " << x << ", " << y);
    CHECK(out.get(0) == (static_cast<std::uint64_t>(want) & width_mask(t)));
  }
}

TEST_CASE("kernels: fp16/bf16 conversions round-trip all 65536 bit patterns", "[kernels]") {
  for (const auto& [fmt, widen, narrow] :
       {std::tuple{kHalf, &k::half_to_float, &k::float_to_half},
        std::tuple{kBf16, &k::bfloat16_to_float, &k::float_to_bfloat16}}) {
    std::size_t bad = 0;
    for (std::uint32_t h = 0; h <= 0xffff; ++h) {
      const auto bits = static_cast<std::uint16_t>(h);
      const float f = widen(bits);
      const double want = ref_decode(h, fmt);
      if (std::isnan(want)) {  // NaN stays NaN, quiet, with sign and payload kept
        bad += std::isnan(f) && (fbits(f) & 0x00400000u) != 0 ? 0 : 1;
        bad += narrow(f) == (h | qnan(fmt, false, 0)) ? 0 : 1;
        continue;
      }
      bad += static_cast<double>(f) == want && std::signbit(f) == std::signbit(want) ? 0 : 1;
      bad += narrow(f) == bits ? 0 : 1;
    }
    INFO("mantissa bits " << fmt.mant_bits);
    CHECK(bad == 0);
  }
}

TEST_CASE("kernels: float_to_half/bfloat16 rounding cases", "[kernels]") {
  using Case = std::pair<float, std::uint16_t>;  // input, expected bits
  constexpr float kInf = std::numeric_limits<float>::infinity();
  // fp16, per line: ties to even (down, up) and just above a tie; largest finite, just below the
  // overflow tie, the tie 65520 (even = inf), overflow; smallest normal, largest subnormal, the
  // tie rounding up into the normals; subnormal ties (to 0, to 2), just above a tie, underflow
  // to -0, a float subnormal; signed zeros and NaNs (quieted).
  // clang-format off
  const Case half_cases[] = {
      {1.0f, 0x3c00}, {1.0f + 0x1p-11f, 0x3c00}, {1.0f + 0x3p-11f, 0x3c02},
      {from_bits(0x3f801001u), 0x3c01}, {65504.0f, 0x7bff}, {65519.996f, 0x7bff},
      {65520.0f, 0x7c00}, {1e6f, 0x7c00}, {-1e6f, 0xfc00}, {kInf, 0x7c00}, {-kInf, 0xfc00},
      {0x1p-14f, 0x0400}, {0x3ffp-24f, 0x03ff}, {0x7ffp-25f, 0x0400}, {0x1p-24f, 0x0001},
      {0x1p-25f, 0x0000}, {0x3p-25f, 0x0002}, {0x1.000002p-25f, 0x0001}, {-0x1p-25f, 0x8000},
      {0x1p-149f, 0x0000}, {0.0f, 0x0000}, {-0.0f, 0x8000}, {from_bits(0x7f800001u), 0x7e00},
      {from_bits(0xffc00000u), 0xfe00}};
  // clang-format on
  // bf16: ties to even (down, up); FLT_MAX overflows, just below the overflow tie; subnormal
  // ties (to 0, to 2); -0; NaN (quieted).
  // clang-format off
  const Case bf16_cases[] = {
      {1.0f + 0x1p-8f, 0x3f80}, {1.0f + 0x3p-8f, 0x3f82}, {from_bits(0x7f7fffffu), 0x7f80},
      {from_bits(0x7f7f7fffu), 0x7f7f}, {from_bits(0x00008000u), 0x0000},
      {from_bits(0x00018000u), 0x0002}, {-0.0f, 0x8000}, {from_bits(0xff800001u), 0xffc0}};
  // clang-format on
  for (const auto& [f, want] : half_cases) {
    INFO("fp16 of float bits " << fbits(f));
    CHECK(k::float_to_half(f) == want);
  }
  for (const auto& [f, want] : bf16_cases) {
    INFO("bf16 of float bits " << fbits(f));
    CHECK(k::float_to_bfloat16(f) == want);
  }
}

namespace {

struct Fp8 {
  Format fmt;
  float (*widen)(std::uint8_t);
  std::uint8_t (*narrow)(float);
  const char* name;
};
const std::array<Fp8, 2> kFp8 = {Fp8{kE4M3, &k::fp8_e4m3_to_float, &k::float_to_fp8_e4m3, "e4m3"},
                                 Fp8{kE5M2, &k::fp8_e5m2_to_float, &k::float_to_fp8_e5m2, "e5m2"}};

}  // namespace

TEST_CASE("kernels: fp8 conversions decode all 256 codes exactly and round-trip", "[kernels]") {
  for (const Fp8& f8 : kFp8) {
    INFO(f8.name);
    std::size_t bad = 0, nans = 0, finite = 0;
    for (std::uint32_t c = 0; c <= 0xff; ++c) {
      const auto code = static_cast<std::uint8_t>(c);
      const float f = f8.widen(code);
      const double want = ref_decode(c, f8.fmt);
      if (std::isnan(want)) {  // NaN in -> NaN out: quiet, sign kept (e5m2: payload bit kept)
        ++nans;
        bad += std::isnan(f) && (fbits(f) & 0x00400000u) != 0 ? 0 : 1;
        bad += std::signbit(f) == ((c & 0x80u) != 0) ? 0 : 1;
        bad += f8.narrow(f) == (c | qnan(f8.fmt, false, 0)) ? 0 : 1;
        continue;
      }
      finite += std::isinf(want) ? 0 : 1;
      bad += static_cast<double>(f) == want && std::signbit(f) == std::signbit(want) ? 0 : 1;
      bad += f8.narrow(f) == code ? 0 : 1;
    }
    CHECK(bad == 0);
    // e4m3: 2 NaNs, 254 finite values; e5m2: 6 NaNs, 2 infinities, 248 finite values.
    CHECK(nans == (f8.fmt.finite ? 2u : 6u));
    CHECK(finite == (f8.fmt.finite ? 254u : 248u));
  }
  // A few decoded values, to pin the reference itself.
  CHECK(k::fp8_e4m3_to_float(0x7e) == 448.0f);
  CHECK(k::fp8_e4m3_to_float(0x78) == 256.0f);  // exponent field 15 is finite in e4m3
  CHECK(k::fp8_e4m3_to_float(0x38) == 1.0f);
  CHECK(k::fp8_e4m3_to_float(0x08) == 0x1p-6f);
  CHECK(k::fp8_e4m3_to_float(0x01) == 0x1p-9f);
  CHECK(k::fp8_e4m3_to_float(0x87) == -0x7p-9f);
  CHECK(k::fp8_e5m2_to_float(0x7b) == 57344.0f);
  CHECK(k::fp8_e5m2_to_float(0x7c) == std::numeric_limits<float>::infinity());
  CHECK(k::fp8_e5m2_to_float(0x3c) == 1.0f);
  CHECK(k::fp8_e5m2_to_float(0x04) == 0x1p-14f);
  CHECK(k::fp8_e5m2_to_float(0x01) == 0x1p-16f);
  CHECK(k::fp8_e5m2_to_float(0x83) == -0x3p-16f);
}

TEST_CASE("kernels: fp8 midpoints between adjacent codes round to even", "[kernels]") {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  for (const Fp8& f8 : kFp8) {
    INFO(f8.name);
    const std::uint32_t last = f8.fmt.finite ? 0x7eu : 0x7bu;  // largest finite code
    std::size_t bad = 0;
    for (std::uint32_t c = 0; c < last; ++c) {  // c and c + 1: zero, subnormals, normals
      for (std::uint32_t sign : {0x00u, 0x80u}) {
        const float lo = f8.widen(static_cast<std::uint8_t>(sign | c));
        const float hi = f8.widen(static_cast<std::uint8_t>(sign | (c + 1)));
        const float mid = (lo + hi) / 2;  // exact in fp32
        const std::uint32_t even = sign | ((c & 1u) == 0 ? c : c + 1);
        INFO("codes " << c << ", " << c + 1 << " sign " << sign);
        bad += f8.narrow(mid) == even ? 0 : 1;
        bad += f8.narrow(std::nextafter(mid, 0.0f)) == (sign | c) ? 0 : 1;
        bad += f8.narrow(std::nextafter(mid, sign ? -kInf : kInf)) == (sign | (c + 1)) ? 0 : 1;
      }
    }
    CHECK(bad == 0);
  }
}

TEST_CASE("kernels: fp8 rounding, subnormal, saturation and NaN cases", "[kernels]") {
  using Case = std::pair<float, std::uint8_t>;  // input, expected bits
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const float kFltMax = std::numeric_limits<float>::max();
  // e4m3, per line: ties to even (1 + 1/16 down to 1, 1 + 3/16 up to 1.25) and just above a tie;
  // 448 is the largest finite value and everything beyond it saturates (the tie 464 with the
  // would-be 480, 480, 1e6, FLT_MAX, infinity), with the sign kept; subnormals: smallest,
  // ties (2^-10 to 0, 3 * 2^-10 to 2 * 2^-9), the tie 7.5 * 2^-9 up into the normals,
  // underflow to -0, a float subnormal; zeros; NaNs of both signs.
  // clang-format off
  const Case e4m3_cases[] = {
      {1.0f + 0x1p-4f, 0x38}, {1.0f + 0x3p-4f, 0x3a}, {from_bits(0x3f880001u), 0x39},
      {448.0f, 0x7e}, {447.0f, 0x7e}, {464.0f, 0x7e}, {480.0f, 0x7e}, {1e6f, 0x7e},
      {kFltMax, 0x7e}, {kInf, 0x7e}, {-464.0f, 0xfe}, {-kInf, 0xfe}, {416.0f, 0x7d},
      {0x1p-9f, 0x01}, {0x1p-10f, 0x00}, {0x3p-10f, 0x02}, {0x1.000002p-10f, 0x01},
      {0xfp-10f, 0x08}, {0x7p-9f, 0x07}, {-0x1p-11f, 0x80}, {0x1p-149f, 0x00},
      {0.0f, 0x00}, {-0.0f, 0x80}, {from_bits(0x7fc00000u), 0x7f}, {from_bits(0xff800001u), 0xff},
      {from_bits(0x7f800001u), 0x7f}};
  // e5m2: ties to even; 57344 is the largest finite value, just below the overflow tie stays
  // there, the tie 61440 (even = 2^16) and beyond overflow to infinity, infinities stay;
  // subnormals: smallest, ties (2^-17 to 0, 3 * 2^-17 to 2 * 2^-16), the tie 3.5 * 2^-16 up
  // into the normals, underflow to -0; NaNs quieted, payload bit kept.
  const Case e5m2_cases[] = {
      {1.0f + 0x1p-3f, 0x3c}, {1.0f + 0x3p-3f, 0x3e}, {from_bits(0x3f900001u), 0x3d},
      {57344.0f, 0x7b}, {61439.996f, 0x7b}, {61440.0f, 0x7c}, {1e6f, 0x7c}, {kFltMax, 0x7c},
      {kInf, 0x7c}, {-kInf, 0xfc}, {-61440.0f, 0xfc},
      {0x1p-16f, 0x01}, {0x1p-17f, 0x00}, {0x3p-17f, 0x02}, {0x7p-17f, 0x04},
      {-0x1p-18f, 0x80}, {0x1p-149f, 0x00}, {0.0f, 0x00}, {-0.0f, 0x80},
      {from_bits(0x7fc00000u), 0x7e}, {from_bits(0xffe00000u), 0xff},
      {from_bits(0x7f800001u), 0x7e}, {from_bits(0x7fa00000u), 0x7f}};
  // clang-format on
  for (const auto& [f, want] : e4m3_cases) {
    INFO("e4m3 of float bits " << fbits(f));
    CHECK(static_cast<int>(k::float_to_fp8_e4m3(f)) == static_cast<int>(want));
  }
  for (const auto& [f, want] : e5m2_cases) {
    INFO("e5m2 of float bits " << fbits(f));
    CHECK(static_cast<int>(k::float_to_fp8_e5m2(f)) == static_cast<int>(want));
  }
}

TEST_CASE("kernels: fp8 sums saturate (e4m3) or overflow to infinity (e5m2)", "[kernels]") {
  // 448 + 448 and 448 * 2 saturate in e4m3; 57344 + 57344 overflows to inf in e5m2; inf
  // inputs stay inf in e5m2; e4m3's NaN propagates through every op.
  auto one = [](DataType t, RedOp op, std::uint8_t a, std::uint8_t b) {
    std::uint8_t d = 0;
    k::reduce(t, op, &d, &a, &b, 1);
    return static_cast<int>(d);
  };
  using enum DataType;
  using enum RedOp;
  CHECK(one(Float8E4M3, Sum, 0x7e, 0x7e) == 0x7e);
  CHECK(one(Float8E4M3, Sum, 0xfe, 0xfe) == 0xfe);
  CHECK(one(Float8E4M3, Prod, 0x7e, 0x40) == 0x7e);  // 448 * 2
  CHECK(one(Float8E4M3, Sum, 0x7e, 0xfe) == 0x00);   // 448 - 448
  CHECK(one(Float8E4M3, Sum, 0x7f, 0x38) == 0x7f);   // NaN + 1
  CHECK(one(Float8E4M3, Max, 0x38, 0xff) == 0xff);   // max(1, -NaN): the NaN
  CHECK(one(Float8E4M3, Min, 0x7f, 0x38) == 0x7f);
  CHECK(one(Float8E5M2, Sum, 0x7b, 0x7b) == 0x7c);
  CHECK(one(Float8E5M2, Sum, 0x7c, 0x3c) == 0x7c);           // inf + 1
  CHECK((one(Float8E5M2, Sum, 0x7c, 0xfc) & 0x7f) == 0x7e);  // inf - inf: a quiet NaN
  CHECK(one(Float8E5M2, Max, 0x7c, 0x3c) == 0x7c);
  CHECK(one(Float8E5M2, Min, 0x3c, 0x7d) == 0x7f);  // min(1, sNaN): the NaN, quieted
  std::uint8_t x = 0x7e;                            // e4m3 448 / 3 = 149.33 -> 144
  k::finalize_avg(Float8E4M3, &x, 1, 3);
  CHECK(static_cast<int>(x) == 0x71);
}

TEST_CASE("kernels: float_to_half/bfloat16/fp8 agree with the reference rounder", "[kernels]") {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  std::vector<float> inputs;
  for (std::uint64_t b = 0; b <= 0xffffffffull; b += 4093) {
    inputs.push_back(from_bits(static_cast<std::uint32_t>(b)));
  }
  // Every fp16/bf16/fp8 midpoint between finite neighbours, and its two float neighbours.
  for (const auto& [fmt, last] : {std::pair{kHalf, 0x7bffu}, std::pair{kBf16, 0x7f7fu},
                                  std::pair{kE4M3, 0x7eu}, std::pair{kE5M2, 0x7bu}}) {
    for (std::uint32_t h = 0; h < last; ++h) {
      const auto mid = static_cast<float>((ref_decode(h, fmt) + ref_decode(h + 1, fmt)) / 2);
      for (float f : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, kInf)}) {
        inputs.push_back(f);
        inputs.push_back(-f);
      }
    }
  }
  std::size_t bad = 0;
  for (float f : inputs) {  // (NaN inputs: covered by the exhaustive and rounding-case tests)
    if (std::isnan(f)) continue;
    bad += k::float_to_half(f) == ref_encode(ref_round(f, kHalf), kHalf) ? 0 : 1;
    bad += k::float_to_bfloat16(f) == ref_encode(ref_round(f, kBf16), kBf16) ? 0 : 1;
    bad += k::float_to_fp8_e4m3(f) == ref_encode(ref_round(f, kE4M3), kE4M3) ? 0 : 1;
    bad += k::float_to_fp8_e5m2(f) == ref_encode(ref_round(f, kE5M2), kE5M2) ? 0 : 1;
  }
  CHECK(bad == 0);
}

TEST_CASE("kernels: finalize_avg for every dtype", "[kernels]") {
  Rng rng(7);
  for (DataType t : kAllTypes) {
    for (int n : {1, 2, 3, 7, 8, 1000}) {
      for (std::size_t count : {std::size_t{1}, std::size_t{9}, std::size_t{1000}}) {
        Buffer buf(t, count, 1);
        fill_random(buf, t, count, rng);
        if (!loom::is_floating(t) && count > 1) buf.set(0, width_mask(t));  // -1 / max
        std::vector<Expected> want(count);
        for (std::size_t i = 0; i < count; ++i) want[i] = ref_avg(t, buf.get(i), n);
        k::finalize_avg(t, buf.data(), count, n);
        std::size_t bad = buf.canaries_intact() ? 0 : 1;
        for (std::size_t i = 0; i < count; ++i) bad += matches(t, want[i], buf.get(i)) ? 0 : 1;
        INFO(tname(t) << " n=" << n << " count=" << count);
        CHECK(bad == 0);
      }
    }
  }
  float keep = 5.0f;
  k::finalize_avg(DataType::Float32, &keep, 1, 0);  // n < 1: no-op
  CHECK(keep == 5.0f);
}

TEST_CASE("kernels: reduce_n equals repeated reduce for every dtype x op", "[kernels]") {
  Rng rng(99);
  constexpr std::size_t kCount = 10007;  // several tiles for every element size
  for (DataType t : kAllTypes) {
    for (RedOp op : kAllOps) {
      for (int nsrc : {1, 2, 3, 5}) {
        std::vector<Buffer> srcs;
        std::vector<const void*> ptrs;
        srcs.reserve(static_cast<std::size_t>(nsrc));
        for (int s = 0; s < nsrc; ++s) {
          fill_random(srcs.emplace_back(t, kCount, static_cast<std::size_t>(s % 2)), t, kCount,
                      rng);
          ptrs.push_back(srcs.back().data());
        }
        Buffer want(t, kCount, 0);
        for (std::size_t i = 0; i < kCount; ++i) want.set(i, srcs[0].get(i));
        for (int s = 1; s < nsrc; ++s) {
          k::reduce(t, op, want.data(), want.data(), ptrs[static_cast<std::size_t>(s)], kCount);
        }
        Buffer got(t, kCount, 1);
        k::reduce_n(t, op, got.data(), ptrs.data(), nsrc, kCount);
        // In place into the last source.
        k::reduce_n(t, op, srcs.back().data(), ptrs.data(), nsrc, kCount);
        std::size_t bad = got.canaries_intact() && srcs.back().canaries_intact() ? 0 : 1;
        for (std::size_t i = 0; i < kCount; ++i) {
          bad += same_result(t, got.get(i), want.get(i)) ? 0 : 1;
          bad += same_result(t, srcs.back().get(i), want.get(i)) ? 0 : 1;
        }
        INFO(tname(t) << " " << oname(op) << " nsrc=" << nsrc);
        CHECK(bad == 0);
      }
    }
  }
}

TEST_CASE("kernels: float min/max keep the operand order and propagate NaN", "[kernels]") {
  // On NaN-free data min/max equal std::min/std::max, i.e. return a on ties (+0 vs -0); a NaN
  // operand wins, a's if both are NaN. An implementation that swaps the operands (e.g. for
  // dst == b) fails here; the random tests check the same with exact NaN expectations.
  constexpr std::size_t kN = 37;  // vector body and scalar tail
  for (DataType t : {DataType::Float16, DataType::BFloat16, DataType::Float32, DataType::Float64,
                     DataType::Float8E4M3, DataType::Float8E5M2}) {
    const Format f = format_of(t);
    const std::uint64_t nan_a = qnan(f, false, 1), nan_b = qnan(f, true, 2);
    for (RedOp op : {RedOp::Min, RedOp::Max}) {
      for (Alias alias : {Alias::None, Alias::DstIsA, Alias::DstIsB}) {
        Buffer a(t, kN, 0), b(t, kN, 1), out(t, kN, 0);
        for (std::size_t i = 0; i < kN; ++i) {  // a = +0, b = -0
          a.set(i, 0);
          b.set(i, sign_bit(f));
        }
        a.set(kN - 2, nan_a);
        b.set(kN - 1, nan_b);
        a.set(kN - 1, nan_a);
        Buffer* dst = alias == Alias::DstIsA ? &a : alias == Alias::DstIsB ? &b : &out;
        k::reduce(t, op, dst->data(), a.data(), b.data(), kN);
        INFO(tname(t) << " " << oname(op) << " alias=" << static_cast<int>(alias));
        for (std::size_t i = 0; i + 2 < kN; ++i) CHECK(dst->get(i) == 0u);
        CHECK((dst->get(kN - 2) == nan_a && dst->get(kN - 1) == nan_a));
      }
    }
  }
}
