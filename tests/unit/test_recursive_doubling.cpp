// Recursive doubling allreduce: exact over the plan simulator for every rank count (powers of
// two and the fold of the ranks beyond them), in and out of place, zero and odd counts; no data
// hazards; the critical path is log2(p) messages (+2 for folded ranks); and every rank's
// floating-point result is bitwise identical (the lower rank's value is always on the left).
#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "algorithms/recursive_doubling.hpp"
#include "plan_sim.hpp"

using namespace loom;
using loom::algo::RingParams;

namespace {

int log2_floor(int n) {
  int k = 0;
  while ((2 << k) <= n) ++k;
  return k;
}

template <typename T>
std::vector<test::SimRank> run(int n, std::size_t count, bool in_place,
                               const std::function<T(int, std::size_t)>& value, DataType dtype) {
  std::vector<test::SimRank> ranks(static_cast<std::size_t>(n));
  const std::size_t bytes = count * sizeof(T);
  for (int r = 0; r < n; ++r) {
    auto p = test::plan_params<RingParams>(r, n, count, sizeof(T));
    p.in_place = in_place;
    auto& rk = ranks[static_cast<std::size_t>(r)];
    rk.plan = algo::rd_allreduce(p);
    rk.send_bytes = rk.recv_bytes = bytes;
    rk.recv_off = in_place ? 0 : bytes;
    rk.mem.assign(2 * bytes + 8, 0x5a);
    for (std::size_t i = 0; i < count; ++i) {
      T v = value(r, i);
      std::memcpy(rk.mem.data() + i * sizeof(T), &v, sizeof(T));
    }
    std::string hz = test::find_hazard(rk.plan, rk.send_off, rk.recv_off);
    INFO("rank " << r << " " << hz);
    REQUIRE(hz.empty());
  }
  std::string err = test::simulate(ranks, dtype, RedOp::Sum);
  INFO(err);
  REQUIRE(err.empty());
  return ranks;
}

}  // namespace

TEST_CASE("rd: allreduce is exact over the plan simulator for 1..17 ranks", "[rd]") {
  std::function<std::int64_t(int, std::size_t)> value = [](int r, std::size_t i) {
    return static_cast<std::int64_t>(i) * 10'000'000 + r + 1;
  };
  for (int n = 1; n <= 17; ++n)
    for (std::size_t count : {0, 1, 2, 5, 13, 64})
      for (bool ip : {false, true}) {
        INFO("n " << n << " count " << count << " in_place " << ip);
        auto ranks = run(n, count, ip, value, DataType::Int64);
        for (int r = 0; r < n; ++r) {
          const auto& rk = ranks[static_cast<std::size_t>(r)];
          for (std::size_t i = 0; i < count; ++i) {
            std::int64_t want = 0;
            for (int q = 0; q < n; ++q) want += value(q, i);
            std::int64_t got = 0;
            std::memcpy(&got, rk.mem.data() + rk.recv_off + i * 8, 8);
            INFO("rank " << r << " element " << i);
            REQUIRE(got == want);
          }
        }
      }
}

TEST_CASE("rd: messages on the critical path and scratch", "[rd]") {
  for (int n = 1; n <= 33; ++n) {
    const int pow2 = 1 << log2_floor(n);
    for (int r = 0; r < n; ++r) {
      algo::Plan plan = algo::rd_allreduce(test::plan_params<RingParams>(r, n, 10, 4));
      int sends = 0, recvs = 0;
      for (const auto& s : plan.steps) {
        sends += s.kind == algo::StepKind::Send;
        recvs += s.kind == algo::StepKind::Recv;
      }
      INFO("n " << n << " rank " << r);
      CHECK(plan.algorithm == "rd");
      const int rounds = log2_floor(n);
      const int extras = n - pow2;
      if (r < 2 * extras && r % 2 == 1) {  // folded into its neighbour: one message each way
        CHECK(sends == 1);
        CHECK(recvs == 1);
        CHECK(plan.scratch_bytes == 0);
        for (const auto& s : plan.steps)
          if (s.kind == algo::StepKind::Send || s.kind == algo::StepKind::Recv)
            CHECK(s.peer == r - 1);
      } else {
        const int fold = r < 2 * extras ? 1 : 0;
        CHECK(sends == rounds + fold);
        CHECK(recvs == rounds + fold);
        CHECK(plan.scratch_bytes == static_cast<std::size_t>(rounds + fold) * 40);
      }
    }
  }
}

TEST_CASE("rd: every rank's float result is bitwise identical", "[rd]") {
  // Magnitudes that make float addition order-dependent: any rank combining in another order
  // would round differently.
  std::function<float(int, std::size_t)> value = [](int r, std::size_t i) {
    const float big[] = {1e8f, -1e8f, 3.0f, 1e-3f, 7.5e7f, -2.5e-2f, 1.1f};
    return big[(static_cast<std::size_t>(r) * 3 + i) % 7] * (1.0f + static_cast<float>(i) / 7);
  };
  for (int n : {2, 3, 4, 5, 6, 7, 8, 12}) {
    INFO("n " << n);
    auto ranks = run(n, 33, false, value, DataType::Float32);
    const auto& first = ranks[0];
    for (int r = 1; r < n; ++r)
      REQUIRE(std::memcmp(ranks[static_cast<std::size_t>(r)].mem.data() + first.recv_off,
                          first.mem.data() + first.recv_off, 33 * 4) == 0);
  }
}
