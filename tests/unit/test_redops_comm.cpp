// The bitwise ops and PreMulSum through the collectives (threads as ranks), and the validation
// that refuses a (dtype, op) pair loom::supports() does not.
#include <catch2/catch.hpp>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "comm_harness.hpp"
#include "reference.hpp"

using namespace loom;
using Catch::Matchers::Contains;
using loom::test::catch_error;

TEST_CASE("redops: a bitwise op on a floating type is InvalidArgument naming rank, call, types",
          "[redops][errors]") {
  loom::test::run_ranks(2, [](Communicator& comm) {
    std::vector<float> buf(8, 1.0f);
    const std::string rank = "rank " + std::to_string(comm.rank());
    auto e = catch_error([&] { comm.allreduce(std::span<float>(buf), RedOp::BitAnd).wait(); });
    CHECK(e.code() == ErrorCode::InvalidArgument);
    CHECK_THAT(e.what(), Contains(rank) && Contains("allreduce") && Contains("float") &&
                             Contains("band") && Contains("not defined"));
    std::vector<std::uint16_t> half(8);
    e = catch_error([&] {
      comm.reduce(half.data(), half.data(), 8, DataType::BFloat16, RedOp::BitXor, 0).wait();
    });
    CHECK(e.code() == ErrorCode::InvalidArgument);
    CHECK_THAT(e.what(),
               Contains(rank) && Contains("reduce") && Contains("bfloat16") && Contains("bxor"));
    std::vector<double> send(4), recv(2);
    e = catch_error([&] {
      comm.reduce_scatter(std::span<const double>(send), std::span<double>(recv), RedOp::BitOr)
          .wait();
    });
    CHECK_THAT(e.what(), Contains(rank) && Contains("reduce_scatter") && Contains("double") &&
                             Contains("bor"));
    // The communicator stays usable.
    comm.allreduce(std::span<float>(buf), RedOp::Sum).wait();
    CHECK(buf[0] == 2.0f);
  });
}

TEST_CASE("redops: bitwise allreduce and reduce_scatter are exact at 3 ranks", "[redops]") {
  loom::test::run_ranks(3, [](Communicator& comm) {
    const int r = comm.rank();
    const std::size_t n = 1000;  // several chunks per rank, an uneven split
    auto mine = [&](int rank, std::size_t i) {
      return static_cast<std::uint32_t>(0x9e3779b9u * (i + 1) ^ (0x01010101u << rank));
    };
    for (RedOp op : {RedOp::BitAnd, RedOp::BitOr, RedOp::BitXor}) {
      std::vector<std::uint32_t> v(n), want(n);
      for (std::size_t i = 0; i < n; ++i) {
        v[i] = mine(r, i);
        std::uint32_t w = mine(0, i);
        for (int q = 1; q < 3; ++q) {
          const std::uint32_t x = mine(q, i);
          w = op == RedOp::BitAnd ? (w & x) : op == RedOp::BitOr ? (w | x) : (w ^ x);
        }
        want[i] = w;
      }
      std::vector<std::uint32_t> send = v;
      comm.allreduce(std::span<std::uint32_t>(v), op).wait();
      CHECK(v == want);
      std::vector<std::uint32_t> part(n / 3 + 1), all(3 * part.size());
      for (std::size_t i = 0; i < all.size(); ++i)
        all[i] = mine(r, i % n) + static_cast<std::uint32_t>(i / n);
      comm.reduce_scatter(std::span<const std::uint32_t>(all), std::span<std::uint32_t>(part), op)
          .wait();
      std::size_t bad = 0;
      for (std::size_t i = 0; i < part.size(); ++i) {
        const std::size_t g = static_cast<std::size_t>(r) * part.size() + i;
        auto elem = [&](int q) { return mine(q, g % n) + static_cast<std::uint32_t>(g / n); };
        std::uint32_t w = elem(0);
        for (int q = 1; q < 3; ++q)
          w = op == RedOp::BitAnd  ? (w & elem(q))
              : op == RedOp::BitOr ? (w | elem(q))
                                   : (w ^ elem(q));
        bad += part[i] != w;
      }
      CHECK(bad == 0);
    }
    // int8 xor of every rank's bytes.
    std::vector<std::int8_t> b(37, static_cast<std::int8_t>(1 << r));
    comm.allreduce(std::span<std::int8_t>(b), RedOp::BitXor).wait();
    CHECK(b == std::vector<std::int8_t>(37, 7));
  });
}

namespace {

// PreMulSum with a scalar per rank, exact for every type: floating ranks scale 0/1 inputs by 0.5
// or 2, integer ranks 0/1/2 inputs by r + 2 (sums of 3 ranks stay exact even in fp8 e5m2).
double premul_scalar(DataType t, int r) {
  if (is_floating(t)) return r % 2 ? 2.0 : 0.5;
  return r + 2;
}
std::int64_t premul_input(DataType t, int r, std::size_t i) {
  return static_cast<std::int64_t>((i + static_cast<std::size_t>(r)) % (is_floating(t) ? 2 : 3));
}
double premul_expected(DataType t, int n, std::size_t i) {
  double sum = 0;
  for (int r = 0; r < n; ++r) sum += premul_scalar(t, r) * double(premul_input(t, r, i));
  return sum;
}

double read_as_double(DataType t, const std::uint8_t* buf, std::size_t i) {
  return loom::test::load_value(t, buf + i * dtype_size(t));
}

}  // namespace

TEST_CASE("redops: PreMulSum scales each rank's input by its own scalar, every type", "[redops]") {
  std::mutex mu;
  std::vector<std::string> wrong;
  loom::test::run_ranks(3, [&](Communicator& comm) {
    const int r = comm.rank(), n = comm.size();
    auto bad = [&](const std::string& what) {
      std::lock_guard lk(mu);
      wrong.push_back(what + " on rank " + std::to_string(r));
    };
    for (DataType t : loom::test::kAllTypes)
      for (bool ip : {false, true}) {
        const std::size_t es = dtype_size(t), count = 37, all = count * std::size_t(n);
        CollOptions o;
        o.scalar = premul_scalar(t, r);
        const std::string at = std::string(to_string(t)) + (ip ? " in place" : "");
        std::vector<std::uint8_t> in(all * es), keep, out(all * es, 0xee);
        for (std::size_t i = 0; i < all; ++i)
          loom::test::store_value(t, in.data() + i * es, premul_input(t, r, i % count));
        keep = in;
        // allreduce
        std::uint8_t* dst = ip ? in.data() : out.data();
        comm.allreduce(in.data(), dst, count, t, RedOp::PreMulSum, o).wait();
        for (std::size_t i = 0; i < count; ++i)
          if (read_as_double(t, dst, i) != premul_expected(t, n, i)) {
            bad("allreduce " + at);
            break;
          }
        if (!ip && in != keep) bad("allreduce changed its input, " + at);
        // reduce to rank 1
        in = keep;
        comm.reduce(in.data(), dst, count, t, RedOp::PreMulSum, 1, o).wait();
        if (r == 1)
          for (std::size_t i = 0; i < count; ++i)
            if (read_as_double(t, dst, i) != premul_expected(t, n, i)) {
              bad("reduce " + at);
              break;
            }
        // reduce_scatter: block r of the inputs (element j of block r is input r*count + j)
        in = keep;
        std::uint8_t* rs = ip ? in.data() + std::size_t(r) * count * es : out.data();
        comm.reduce_scatter(in.data(), rs, count, t, RedOp::PreMulSum, o).wait();
        for (std::size_t j = 0; j < count; ++j)
          if (read_as_double(t, rs, j) != premul_expected(t, n, j)) {
            bad("reduce_scatter " + at);
            break;
          }
      }
  });
  INFO((wrong.empty() ? std::string() : wrong.front()));
  CHECK(wrong.empty());
}
