// Bruck's log-depth allgather and reduce-scatter: exact over the plan simulator at 1..20 ranks
// (every contribution counted once), in and out of place, zero and uneven counts, in rank order
// and in a shuffled ring order; no data hazards; ceil(log2 n) rounds. The selector costs them,
// LOOM_ALGO=bruck forces them; through communicators over shm and tcp (every dtype x op) in
// test_collectives.cpp.
#include <catch2/catch.hpp>
#include <cstring>
#include <set>

#include "algorithms/bruck.hpp"
#include "algorithms/factory.hpp"
#include "plan_sim.hpp"
#include "selector/catalog.hpp"
#include "selector/selector.hpp"

using namespace loom;

namespace {

// Element i of rank r: the high part says which element, the low bits which rank, so a sum
// shows every contribution exactly once.
std::int64_t bruck_value(int r, std::size_t i) {
  return static_cast<std::int64_t>(i) * 10'000'000 + (std::int64_t{1} << r);
}

// A ring order that is not rank order: odd positions first, then even ones.
std::vector<int> bruck_order(int n) {
  std::vector<int> order;
  for (int r = 1; r < n; r += 2) order.push_back(r);
  for (int r = 0; r < n; r += 2) order.push_back(r);
  return order;
}

algo::RingParams bruck_params(int r, int n, std::size_t count, bool in_place, bool shuffle) {
  auto p = test::plan_params<algo::RingParams>(r, n, count, 8);
  p.in_place = in_place;
  if (shuffle) p.order = bruck_order(n);
  return p;
}

// Runs every rank's plan; allgather when `gather`, else reduce-scatter. Returns the ranks.
std::vector<test::SimRank> bruck_run(bool gather, int n, std::size_t count, bool in_place,
                                     bool shuffle) {
  std::vector<test::SimRank> ranks(static_cast<std::size_t>(n));
  const std::size_t es = 8, block = count * es, all = block * static_cast<std::size_t>(n);
  for (int r = 0; r < n; ++r) {
    auto& rk = ranks[static_cast<std::size_t>(r)];
    const auto p = bruck_params(r, n, count, in_place, shuffle);
    rk.plan = gather ? algo::bruck_allgather(p) : algo::bruck_reduce_scatter(p);
    rk.send_bytes = gather ? block : all;
    rk.recv_bytes = gather ? all : block;
    const std::size_t own = static_cast<std::size_t>(r) * block;
    rk.send_off = in_place ? (gather ? own : 0) : 0;
    rk.recv_off = in_place ? (gather ? 0 : own) : rk.send_bytes;
    rk.mem.assign(in_place ? all + 8 : rk.send_bytes + rk.recv_bytes + 8, 0);
    std::memset(rk.mem.data() + rk.recv_off, 0x5a, rk.recv_bytes);
    for (std::size_t i = 0; i < rk.send_bytes / es; ++i) {
      const std::int64_t v = bruck_value(r, i);
      std::memcpy(rk.mem.data() + rk.send_off + i * es, &v, es);
    }
    const std::string hz = test::find_hazard(rk.plan, rk.send_off, rk.recv_off);
    INFO("rank " << r << " " << hz);
    REQUIRE(hz.empty());
  }
  const std::string err = test::simulate(ranks, DataType::Int64, RedOp::Sum);
  INFO(err);
  REQUIRE(err.empty());
  return ranks;
}

std::int64_t bruck_at(const test::SimRank& rk, std::size_t i) {
  std::int64_t v = 0;
  std::memcpy(&v, rk.mem.data() + rk.recv_off + i * 8, 8);
  return v;
}

}  // namespace

TEST_CASE("bruck: allgather is exact over the plan simulator", "[bruck][algorithms]") {
  for (int n = 1; n <= 20; ++n)
    for (std::size_t count : {0, 1, 3, 7})
      for (bool ip : {false, true})
        for (bool shuffle : {false, true}) {
          INFO(n << " ranks, count " << count << (ip ? " in place" : "") << " shuffled "
                 << shuffle);
          const auto ranks = bruck_run(true, n, count, ip, shuffle);
          for (int r = 0; r < n; ++r)
            for (std::size_t i = 0; i < count * static_cast<std::size_t>(n); ++i) {
              INFO("rank " << r << " element " << i);
              REQUIRE(bruck_at(ranks[static_cast<std::size_t>(r)], i) ==
                      bruck_value(static_cast<int>(i / count), i % count));
            }
        }
}

TEST_CASE("bruck: reduce-scatter is exact over the plan simulator", "[bruck][algorithms]") {
  for (int n = 1; n <= 20; ++n)
    for (std::size_t count : {0, 1, 3, 7})
      for (bool ip : {false, true})
        for (bool shuffle : {false, true}) {
          INFO(n << " ranks, count " << count << (ip ? " in place" : "") << " shuffled "
                 << shuffle);
          const auto ranks = bruck_run(false, n, count, ip, shuffle);
          for (int r = 0; r < n; ++r)
            for (std::size_t i = 0; i < count; ++i) {
              std::int64_t want = 0;
              for (int q = 0; q < n; ++q)
                want += bruck_value(q, static_cast<std::size_t>(r) * count + i);
              INFO("rank " << r << " element " << i);
              REQUIRE(bruck_at(ranks[static_cast<std::size_t>(r)], i) == want);
            }
        }
}

TEST_CASE("bruck: ceil(log2 n) rounds, each to one peer, (n - 1) / n of the buffer",
          "[bruck][algorithms]") {
  for (int n : {2, 3, 5, 7, 8, 13, 64}) {
    int rounds = 0;
    while ((1 << rounds) < n) ++rounds;
    for (int r = 0; r < n; ++r)
      for (bool gather : {true, false}) {
        const auto p = bruck_params(r, n, 10, false, false);
        const algo::Plan plan = gather ? algo::bruck_allgather(p) : algo::bruck_reduce_scatter(p);
        std::set<int> to, from;
        std::size_t sent = 0;
        for (const algo::Step& s : plan.steps) {
          if (s.kind == algo::StepKind::Send) {
            to.insert(s.peer);
            sent += s.src.bytes;
          }
          if (s.kind == algo::StepKind::Recv) from.insert(s.peer);
        }
        INFO(n << " ranks, rank " << r << (gather ? " allgather" : " reduce-scatter"));
        CHECK(static_cast<int>(to.size()) == rounds);
        CHECK(static_cast<int>(from.size()) == rounds);
        CHECK(sent == static_cast<std::size_t>(n - 1) * 10 * 8);
        CHECK(plan.algorithm == "bruck");
      }
  }
}

TEST_CASE("bruck: the factory builds it for allgather and reduce_scatter only",
          "[bruck][algorithms]") {
  algo::PlanRequest r;
  r.op.count = 16;
  r.op.dtype = DataType::Float32;
  r.algo = coll::Algo::Bruck;
  r.rank = 1;
  r.nranks = 5;
  for (auto [kind, name] : {std::pair{coll::CollKind::AllGather, "bruck"},
                            std::pair{coll::CollKind::ReduceScatter, "bruck"},
                            std::pair{coll::CollKind::AllReduce, "ring"},
                            std::pair{coll::CollKind::Broadcast, "chain"}}) {
    r.op.kind = kind;
    CHECK(algo::make_plan(r).algorithm == name);
  }
}

TEST_CASE("bruck: the catalog names it, LOOM_ALGO forces and excludes it", "[bruck][selector]") {
  const select::AlgoRow* row = select::find_row("bruck");
  REQUIRE(row != nullptr);
  CHECK(row->algo == coll::Algo::Bruck);
  CHECK(select::find_row("log") == row);
  CHECK(select::supports(select::Coll::AllGather, coll::Algo::Bruck));
  CHECK(select::supports(select::Coll::ReduceScatter, coll::Algo::Bruck));
  CHECK_FALSE(select::supports(select::Coll::AllReduce, coll::Algo::Bruck));
  auto p = select::Policy::parse("bruck");
  REQUIRE(p.is_ok());
  CHECK(p->forced[static_cast<std::size_t>(select::Coll::AllGather)] == coll::Algo::Bruck);
  CHECK(p->forced[static_cast<std::size_t>(select::Coll::ReduceScatter)] == coll::Algo::Bruck);
  CHECK_FALSE(p->forced[static_cast<std::size_t>(select::Coll::AllReduce)].has_value());
  CHECK_FALSE(select::Policy::parse("allreduce:bruck").is_ok());
  CHECK(coll::forced_by(Algorithm::Bruck) == coll::Algo::Bruck);
}

TEST_CASE("bruck: the selector takes it for small gathers across many hosts, the ring for large",
          "[bruck][selector]") {
  select::Shape s;
  s.nranks = 32;
  s.nhosts = 32;
  s.per_host = 1;
  select::Tuning t;
  t.inter = {20, 1.0};
  const auto table = select::CostTable::build(s, t, select::Pipeline{});
  for (auto c : {select::Coll::AllGather, select::Coll::ReduceScatter}) {
    const auto small = select::choose(c, 32 * 1024, table, std::nullopt);
    CHECK(small.algo == coll::Algo::Bruck);
    // 5 rounds of 20 us against the ring's 31.
    CHECK(small.us_of(coll::Algo::Bruck) < 0.25 * small.us_of(coll::Algo::Ring));
    // Above 16 MiB it is no candidate (its scratch; the ring moves as many bytes).
    const auto large = select::choose(c, std::size_t{64} << 20, table, std::nullopt);
    CHECK(large.algo == coll::Algo::Ring);
    auto no_bruck = select::Policy::parse("^bruck");
    REQUIRE(no_bruck.is_ok());
    CHECK(select::choose(c, 32 * 1024, table, std::nullopt, no_bruck->excluded).algo ==
          coll::Algo::Ring);
  }
}

TEST_CASE("bruck: across hosts of several ranks its NIC load makes the ring win large sizes",
          "[bruck][selector]") {
  select::Shape s;
  s.nranks = 32;
  s.nhosts = 8;
  s.per_host = 4;
  select::Tuning t;
  t.inter = {20, 1.0};
  t.nic_gbps = 1.0;
  const auto table = select::CostTable::build(s, t, select::Pipeline{});
  // Rounds 2^k >= 4 send every rank's blocks across hosts: 4x what the ring puts on a NIC.
  const auto d = select::choose(select::Coll::AllGather, 8 << 20, table, std::nullopt);
  CHECK(d.us_of(coll::Algo::Bruck) > 2 * d.us_of(coll::Algo::Ring));
  CHECK(d.algo != coll::Algo::Bruck);
}
