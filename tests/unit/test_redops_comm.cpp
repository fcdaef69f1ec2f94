// The bitwise ops and PreMulSum through the collectives (threads as ranks), and the validation
// that refuses a (dtype, op) pair loom::supports() does not.
#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "comm_harness.hpp"

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

TEST_CASE("redops: PreMulSum is accepted for every type (scalar 1 until calls take one)",
          "[redops]") {
  loom::test::run_ranks(3, [](Communicator& comm) {
    std::vector<float> f(100, static_cast<float>(comm.rank() + 1));
    comm.allreduce(std::span<float>(f), RedOp::PreMulSum).wait();
    CHECK(f == std::vector<float>(100, 6.0f));
    std::vector<std::int64_t> i(100, comm.rank() - 5);
    comm.allreduce(std::span<std::int64_t>(i), RedOp::PreMulSum).wait();
    CHECK(i == std::vector<std::int64_t>(100, -12));
  });
}
