// Host tests of the CUDA reduction kernels' logic (kernels/cuda/reduce_logic.hpp): the same
// __host__ __device__ functions the kernels run, executed here for every thread of an emulated
// grid, for every dtype x op, many sizes, alignments (shared and mismatched) and aliasing modes,
// and compared bit for bit with the host kernels.
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

#include "kernels/cuda/reduce_logic.hpp"
#include "kernels/cuda/reduce_multi_logic.hpp"
#include "kernels/host/reduce.hpp"

namespace kc = loom::kernels::cuda;
using loom::DataType;
using loom::RedOp;

namespace {

constexpr std::size_t kSizes[] = {0, 1, 2, 3, 7, 8, 15, 16, 17, 31, 32, 33, 63, 100, 257, 1000};
constexpr std::size_t kThreadCounts[] = {1, 5, 64};

/// Random storage elements: any bit pattern for integers, finite values in [-100, 100) for
/// 16/32/64-bit floating types, any non-NaN code for fp8 (infinities, subnormals and values that
/// saturate or overflow included): NaN-free, so every path computes the same result (the sign and
/// payload of a NaN made from two NaNs depend on the instruction's operand order).
template <typename E>
std::vector<typename E::S> random_elems(std::size_t n, std::mt19937_64& rng) {
  using S = typename E::S;
  std::vector<S> v(n);
  std::uniform_real_distribution<float> real(-100.0f, 100.0f);
  for (auto& x : v) {
    if constexpr (std::is_same_v<E, kc::HalfCodec>) {
      x = loom::kernels::float_to_half(real(rng));
    } else if constexpr (std::is_same_v<E, kc::BFloat16Codec>) {
      x = loom::kernels::float_to_bfloat16(real(rng));
    } else if constexpr (std::is_same_v<E, kc::Fp8E4M3Codec>) {
      do x = static_cast<S>(rng());
      while ((x & 0x7fu) == 0x7fu);
    } else if constexpr (std::is_same_v<E, kc::Fp8E5M2Codec>) {
      do x = static_cast<S>(rng());
      while ((x & 0x7fu) > 0x7cu);
    } else if constexpr (std::is_floating_point_v<S>) {
      x = static_cast<S>(real(rng));
    } else {
      x = static_cast<S>(rng());
    }
  }
  return v;
}

enum class Alias { None, DstIsA, DstIsB };

/// One emulated launch over buffers placed at element offsets (od, oa, ob) from 16-byte-aligned
/// bases; checks against kernels::reduce on copies of the same inputs.
template <typename E, typename Op>
void check_case(DataType dt, RedOp op, std::size_t count, std::size_t od, std::size_t oa,
                std::size_t ob, Alias alias, std::size_t nthreads, std::mt19937_64& rng) {
  using S = typename E::S;
  const std::size_t pad = 32;
  auto a_in = random_elems<E>(count, rng);
  auto b_in = random_elems<E>(count, rng);
  // 16-byte aligned backing stores with room for the offsets.
  std::vector<kc::Pack<S>> da((count + pad) / kc::Pack<S>::kN + 2);
  std::vector<kc::Pack<S>> db(da.size()), dd(da.size());
  S* a = reinterpret_cast<S*>(da.data()) + oa;
  S* b = reinterpret_cast<S*>(db.data()) + ob;
  S* d = reinterpret_cast<S*>(dd.data()) + od;
  if (count) {
    std::memcpy(a, a_in.data(), count * sizeof(S));
    std::memcpy(b, b_in.data(), count * sizeof(S));
  }
  if (alias == Alias::DstIsA) d = a;
  if (alias == Alias::DstIsB) d = b;
  // Guard elements right after the range must stay untouched.
  const S sentinel = static_cast<S>(0x5a);
  d[count] = sentinel;

  std::vector<S> expect(count);
  loom::kernels::reduce(dt, op, expect.data(), a_in.data(), b_in.data(), count);

  const kc::Split s = kc::split_for_vectors(reinterpret_cast<std::uintptr_t>(d),
                                            reinterpret_cast<std::uintptr_t>(a),
                                            reinterpret_cast<std::uintptr_t>(b), count, sizeof(S));
  for (std::size_t t = 0; t < nthreads; ++t)
    kc::reduce_thread<E, Op, kc::HostMemory>(d, a, b, s, t, nthreads);

  INFO("dtype " << loom::to_string(dt) << " op " << loom::to_string(op) << " count " << count
                << " offsets " << od << "," << oa << "," << ob << " alias "
                << static_cast<int>(alias) << " threads " << nthreads);
  REQUIRE(std::memcmp(d, expect.data(), count * sizeof(S)) == 0);
  REQUIRE(std::memcmp(&d[count], &sentinel, sizeof(S)) == 0);
}

template <typename E, typename Op>
void check_op(DataType dt, RedOp op) {
  using S = typename E::S;
  constexpr std::size_t kN = kc::Pack<S>::kN;
  std::mt19937_64 rng(static_cast<std::uint64_t>(dt) * 31 + static_cast<std::uint64_t>(op));
  for (std::size_t count : kSizes) {
    for (std::size_t nthreads : kThreadCounts) {
      for (std::size_t o = 0; o < kN; ++o)
        check_case<E, Op>(dt, op, count, o, o, o, Alias::None, nthreads, rng);
      // Mismatched alignments fall back to scalars.
      check_case<E, Op>(dt, op, count, 0, 1 % kN, 0, Alias::None, nthreads, rng);
      check_case<E, Op>(dt, op, count, 1 % kN, 0, 2 % kN, Alias::None, nthreads, rng);
      check_case<E, Op>(dt, op, count, 0, 0, kN - 1, Alias::None, nthreads, rng);
      // In place, both operand orders.
      check_case<E, Op>(dt, op, count, 0, 0, 0, Alias::DstIsA, nthreads, rng);
      check_case<E, Op>(dt, op, count, 1 % kN, 1 % kN, 1 % kN, Alias::DstIsB, nthreads, rng);
    }
  }
}

template <typename E>
void check_divide(DataType dt) {
  using S = typename E::S;
  std::mt19937_64 rng(77 + static_cast<std::uint64_t>(dt));
  for (std::size_t count : kSizes) {
    for (int n : {1, 3, 7}) {
      for (std::size_t off = 0; off < kc::Pack<S>::kN; off += 1 + kc::Pack<S>::kN / 4) {
        auto in = random_elems<E>(count, rng);
        std::vector<kc::Pack<S>> store(count / kc::Pack<S>::kN + 2);
        S* x = reinterpret_cast<S*>(store.data()) + off;
        if (count) std::memcpy(x, in.data(), count * sizeof(S));
        auto expect = in;
        loom::kernels::finalize_avg(dt, expect.data(), count, n);
        const auto addr = reinterpret_cast<std::uintptr_t>(x);
        const kc::Split s = kc::split_for_vectors(addr, addr, addr, count, sizeof(S));
        for (std::size_t t = 0; t < 5; ++t) kc::divide_thread<E, kc::HostMemory>(x, n, s, t, 5);
        INFO("dtype " << loom::to_string(dt) << " count " << count << " n " << n << " off " << off);
        REQUIRE(std::memcmp(x, expect.data(), count * sizeof(S)) == 0);
      }
    }
  }
}

/// scale_thread (PreMulSum's local step) against kernels::scale, out of place and in place.
template <typename E>
void check_scale(DataType dt) {
  using S = typename E::S;
  std::mt19937_64 rng(313 + static_cast<std::uint64_t>(dt));
  for (double scalar : {3.0, -0.37, 1.0 / 3, 1e30, -2.5}) {
    for (std::size_t count : kSizes) {
      for (std::size_t off = 0; off < kc::Pack<S>::kN; off += 1 + kc::Pack<S>::kN / 4) {
        auto in = random_elems<E>(count, rng);
        std::vector<kc::Pack<S>> sx(count / kc::Pack<S>::kN + 2), sd(sx.size());
        S* x = reinterpret_cast<S*>(sx.data()) + off;
        S* d = reinterpret_cast<S*>(sd.data()) + (off + 1) % kc::Pack<S>::kN;
        if (count) std::memcpy(x, in.data(), count * sizeof(S));
        auto expect = in;
        loom::kernels::scale(dt, expect.data(), expect.data(), count, scalar);
        const kc::FactorType<E> f = kc::to_factor<E>(scalar);
        const auto ax = reinterpret_cast<std::uintptr_t>(x);
        const auto ad = reinterpret_cast<std::uintptr_t>(d);
        const kc::Split out = kc::split_for_vectors(ad, ax, ax, count, sizeof(S));
        for (std::size_t t = 0; t < 5; ++t) kc::scale_thread<E, kc::HostMemory>(d, x, f, out, t, 5);
        const kc::Split in_place = kc::split_for_vectors(ax, ax, ax, count, sizeof(S));
        for (std::size_t t = 0; t < 3; ++t)
          kc::scale_thread<E, kc::HostMemory>(x, x, f, in_place, t, 3);
        INFO("dtype " << loom::to_string(dt) << " count " << count << " scalar " << scalar);
        REQUIRE(std::memcmp(d, expect.data(), count * sizeof(S)) == 0);
        REQUIRE(std::memcmp(x, expect.data(), count * sizeof(S)) == 0);
      }
    }
  }
}

/// The multi-buffer kernel's logic against a chain of host kernels (src[0] OP src[1], then OP
/// src[2], ...; then finalize_avg when dividing): 1 to 5 sources, 1 to 3 destinations, every
/// size, shared and mismatched alignments, a destination that is exactly a source, and a
/// skipped launch that writes nothing.
template <typename E, typename Op>
void check_multi(DataType dt, RedOp op) {
  using S = typename E::S;
  constexpr std::size_t kN = kc::Pack<S>::kN;
  std::mt19937_64 rng(991 + static_cast<std::uint64_t>(dt) * 17 + static_cast<std::uint64_t>(op));
  for (std::size_t count : kSizes)
    for (int nsrc = 1; nsrc <= 5; nsrc += 2)
      for (int ndst : {1, 3})
        for (int layout = 0; layout < 4;
             ++layout) {  // 0 aligned, 1 shifted, 2 mismatched, 3 in place
          const int divide_by = (op == RedOp::Sum && layout == 1) ? nsrc : 0;
          std::vector<std::vector<kc::Pack<S>>> store(static_cast<std::size_t>(nsrc + ndst),
                                                      std::vector<kc::Pack<S>>(count / kN + 3));
          kc::MultiArgs a;
          a.nsrc = nsrc;
          a.ndst = ndst;
          a.count = count;
          a.divide_by = divide_by;
          std::vector<std::vector<S>> in;
          for (int k = 0; k < nsrc; ++k) {
            const std::size_t off = layout == 0 ? 0 : layout == 2 ? (k % 2) % kN : 1 % kN;
            S* p = reinterpret_cast<S*>(store[static_cast<std::size_t>(k)].data()) + off;
            in.push_back(random_elems<E>(count, rng));
            if (count) std::memcpy(p, in.back().data(), count * sizeof(S));
            a.src[k] = p;
          }
          for (int j = 0; j < ndst; ++j) {
            const std::size_t off = layout == 0 ? 0 : 1 % kN;
            S* d = reinterpret_cast<S*>(store[static_cast<std::size_t>(nsrc + j)].data()) + off;
            if (layout == 3 && j < nsrc) d = const_cast<S*>(static_cast<const S*>(a.src[j]));
            d[count] = static_cast<S>(0x5a);
            a.dst[j] = d;
          }
          std::vector<S> expect = in[0];
          for (int k = 1; k < nsrc; ++k)
            loom::kernels::reduce(dt, op, expect.data(), expect.data(), in[k].data(), count);
          if (divide_by) loom::kernels::finalize_avg(dt, expect.data(), count, divide_by);
          const kc::Split sp = kc::split_multi(a, sizeof(S));
          for (std::size_t t = 0; t < 7; ++t)
            kc::reduce_multi_thread<E, Op, kc::HostMemory>(a, sp, t, 7);
          INFO("dtype " << loom::to_string(dt) << " op " << loom::to_string(op) << " count "
                        << count << " sources " << nsrc << " destinations " << ndst << " layout "
                        << layout);
          for (int j = 0; j < ndst; ++j) {
            const S* d = static_cast<const S*>(a.dst[j]);
            REQUIRE(std::memcmp(d, expect.data(), count * sizeof(S)) == 0);
            const S sentinel = static_cast<S>(0x5a);
            REQUIRE(std::memcmp(&d[count], &sentinel, sizeof(S)) == 0);
          }
        }
}

template <typename E>
void check_dtype(DataType dt) {
  check_op<E, kc::SumOp>(dt, RedOp::Sum);
  check_op<E, kc::ProdOp>(dt, RedOp::Prod);
  check_op<E, kc::MinOp>(dt, RedOp::Min);
  check_op<E, kc::MaxOp>(dt, RedOp::Max);
  if constexpr (std::is_integral_v<typename E::C>) {
    check_op<E, kc::BitAndOp>(dt, RedOp::BitAnd);
    check_op<E, kc::BitOrOp>(dt, RedOp::BitOr);
    check_op<E, kc::BitXorOp>(dt, RedOp::BitXor);
  }
  check_divide<E>(dt);
  check_scale<E>(dt);
  check_multi<E, kc::SumOp>(dt, RedOp::Sum);
  check_multi<E, kc::MaxOp>(dt, RedOp::Max);
  check_multi<E, kc::ProdOp>(dt, RedOp::Prod);
  check_multi<E, kc::MinOp>(dt, RedOp::Min);
  if constexpr (std::is_integral_v<typename E::C>) check_multi<E, kc::BitXorOp>(dt, RedOp::BitXor);
}

}  // namespace

TEST_CASE("cuda kernel logic: split covers every element once, vectors aligned",
          "[cuda][kernels]") {
  for (std::size_t elem : {1u, 2u, 4u, 8u}) {
    for (std::size_t count : kSizes) {
      for (std::uintptr_t mis = 0; mis < 16; mis += elem) {
        const std::uintptr_t base = 4096 + mis;
        const kc::Split s = kc::split_for_vectors(base, base + 64, base + 128, count, elem);
        INFO("elem " << elem << " count " << count << " mis " << mis);
        REQUIRE(s.count == count);
        REQUIRE(s.head <= count);
        REQUIRE(s.head + s.nvec * (16 / elem) == s.tail_begin);
        REQUIRE(s.tail_begin <= count);
        REQUIRE(s.scalars() + s.nvec * (16 / elem) == count);
        if (s.nvec > 0) REQUIRE((base + s.head * elem) % 16 == 0);
        REQUIRE(s.head < 16 / elem);                // at most one vector's worth of head
        REQUIRE(count - s.tail_begin < 16 / elem);  // and of tail
        std::vector<int> hits(count, 0);
        for (std::size_t k = 0; k < s.scalars(); ++k) ++hits[s.scalar_index(k)];
        for (std::size_t v = 0; v < s.nvec; ++v)
          for (std::size_t j = 0; j < 16 / elem; ++j) ++hits[s.head + v * (16 / elem) + j];
        for (int h : hits) REQUIRE(h == 1);
      }
    }
  }
  // Different alignments modulo 16: all scalar.
  const kc::Split s = kc::split_for_vectors(4096, 4096 + 4, 4096, 100, 4);
  CHECK(s.nvec == 0);
  CHECK(s.scalars() == 100);
  // Misaligned to the element itself: all scalar.
  CHECK(kc::split_for_vectors(4097, 4097, 4097, 100, 4).nvec == 0);
}

TEST_CASE("cuda kernel logic: grid sized from SM count", "[cuda][kernels]") {
  CHECK(kc::grid_for(0, 108).blocks == 1);
  CHECK(kc::grid_for(1, 108).blocks == 1);
  CHECK(kc::grid_for(256, 108).blocks == 1);
  CHECK(kc::grid_for(257, 108).blocks == 2);
  // 64 MiB of floats in 16-byte vectors: capped at blocks_per_sm * SMs.
  CHECK(kc::grid_for((64u << 20) / 16, 108).blocks == 108 * 8);
  CHECK(kc::grid_for((64u << 20) / 16, 132).blocks == 132 * 8);
  CHECK(kc::grid_for(1u << 30, 0).blocks == 8);  // unknown SM count: one SM's worth
  CHECK(kc::grid_for(1000, 108, 128).threads == 128);
}

TEST_CASE("cuda kernel logic: every dtype x op and scale match the host kernels",
          "[cuda][kernels]") {
  check_dtype<kc::NativeCodec<std::int8_t>>(DataType::Int8);
  check_dtype<kc::NativeCodec<std::uint8_t>>(DataType::Uint8);
  check_dtype<kc::NativeCodec<std::int32_t>>(DataType::Int32);
  check_dtype<kc::NativeCodec<std::uint32_t>>(DataType::Uint32);
  check_dtype<kc::NativeCodec<std::int64_t>>(DataType::Int64);
  check_dtype<kc::NativeCodec<std::uint64_t>>(DataType::Uint64);
  check_dtype<kc::HalfCodec>(DataType::Float16);
  check_dtype<kc::BFloat16Codec>(DataType::BFloat16);
  check_dtype<kc::NativeCodec<float>>(DataType::Float32);
  check_dtype<kc::NativeCodec<double>>(DataType::Float64);
  check_dtype<kc::Fp8E4M3Codec>(DataType::Float8E4M3);
  check_dtype<kc::Fp8E5M2Codec>(DataType::Float8E5M2);
}

// The fp8 codecs are constexpr, so the device code's conversions can be pinned at compile time.
static_assert(kc::Fp8E4M3Codec::store(448.0f) == 0x7e);
static_assert(kc::Fp8E4M3Codec::store(1e9f) == 0x7e);  // saturates
static_assert(kc::Fp8E4M3Codec::load(0x7e) == 448.0f);
static_assert(kc::Fp8E5M2Codec::store(61440.0f) == 0x7c);  // overflows to infinity
static_assert(kc::Fp8E5M2Codec::load(0x01) == 0x1p-16f);

TEST_CASE("cuda kernel logic: fp8 codecs are the host kernels' conversions", "[cuda][kernels]") {
  namespace k = loom::kernels;
  std::size_t bad = 0;
  for (std::uint32_t c = 0; c <= 0xff; ++c) {  // every code decodes alike (NaN: both NaN)
    const auto code = static_cast<std::uint8_t>(c);
    const float e4 = kc::Fp8E4M3Codec::load(code), e5 = kc::Fp8E5M2Codec::load(code);
    const float h4 = k::fp8_e4m3_to_float(code), h5 = k::fp8_e5m2_to_float(code);
    bad += (std::isnan(e4) && std::isnan(h4)) ||
                   std::bit_cast<std::uint32_t>(e4) == std::bit_cast<std::uint32_t>(h4)
               ? 0
               : 1;
    bad += (std::isnan(e5) && std::isnan(h5)) ||
                   std::bit_cast<std::uint32_t>(e5) == std::bit_cast<std::uint32_t>(h5)
               ? 0
               : 1;
  }
  for (std::uint64_t b = 0; b <= 0xffffffffull; b += 65521) {  // floats of every range, NaNs too
    const float f = std::bit_cast<float>(static_cast<std::uint32_t>(b));
    bad += kc::Fp8E4M3Codec::store(f) == k::float_to_fp8_e4m3(f) ? 0 : 1;
    bad += kc::Fp8E5M2Codec::store(f) == k::float_to_fp8_e5m2(f) ? 0 : 1;
  }
  CHECK(bad == 0);
  CHECK(kc::combine<kc::Fp8E4M3Codec, kc::SumOp>(0x38, 0x38) == 0x40);   // 1 + 1 = 2
  CHECK(kc::combine<kc::Fp8E5M2Codec, kc::ProdOp>(0x40, 0x42) == 0x46);  // 2 * 3 = 6
  CHECK(kc::divide<kc::Fp8E4M3Codec>(0x7e, 3) == 0x71);                  // 448 / 3 -> 144
}

TEST_CASE("cuda kernel logic: float min/max propagate NaN like the host kernels",
          "[cuda][kernels]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(std::isnan(kc::MinOp::apply(nan, 1.0f)));
  CHECK(std::isnan(kc::MinOp::apply(1.0f, nan)));
  CHECK(std::isnan(kc::MaxOp::apply(nan, 1.0f)));
  CHECK(std::isnan(kc::MaxOp::apply(1.0f, nan)));
  CHECK(kc::MinOp::apply(2.0, -3.0) == -3.0);
  CHECK(kc::MaxOp::apply(std::int8_t{-128}, std::int8_t{127}) == 127);
  // Integer sum wraps.
  CHECK(kc::SumOp::apply(std::int32_t{2147483647}, std::int32_t{1}) == -2147483647 - 1);
  CHECK(kc::combine<kc::HalfCodec, kc::SumOp>(0x3c00, 0x3c00) == 0x4000);       // 1 + 1 = 2
  CHECK(kc::combine<kc::BFloat16Codec, kc::ProdOp>(0x4000, 0x4040) == 0x40c0);  // 2 * 3 = 6
}

TEST_CASE("cuda kernel logic: the multi-buffer split and the abandon word", "[cuda][kernels]") {
  alignas(16) static std::uint8_t mem[4096];
  kc::MultiArgs a;
  a.nsrc = 3;
  a.ndst = 2;
  a.count = 1000;
  a.src[0] = mem + 16;
  a.src[1] = mem + 32;
  a.src[2] = mem + 48;
  a.dst[0] = mem + 1024;
  a.dst[1] = mem + 2048;
  CHECK(kc::split_multi(a, 4).nvec == 250);  // every pointer 16-byte aligned: all vectors
  a.dst[1] = mem + 2052;                     // one destination shifted by an element
  CHECK(kc::split_multi(a, 4).nvec == 0);
  CHECK(kc::split_multi(a, 4).scalars() == 1000);
  CHECK(kc::multi_valid(a));
  a.nsrc = 0;
  CHECK_FALSE(kc::multi_valid(a));
  a.nsrc = kc::kMaxMultiPointers + 1;
  CHECK_FALSE(kc::multi_valid(a));
  // Abandoned from ticket 7 on (cyclically); 0 abandons nothing.
  std::uint32_t word = 0;
  a.skip_word = &word;
  a.ticket = 7;
  CHECK_FALSE(kc::multi_skipped(a));
  word = 8;
  CHECK_FALSE(kc::multi_skipped(a));
  word = 7;
  CHECK(kc::multi_skipped(a));
  word = 0xfffffff0u;  // before ticket 7 after the counter wrapped
  CHECK(kc::multi_skipped(a));
}
