// Ring and chain schedules, run over the in-memory plan simulator for 1..20 ranks (exact
// contribution checks) and larger rings (deadlock freedom), with hazard checks on small plans.
#include <catch2/catch.hpp>
#include <cstring>

#include "algorithms/ring.hpp"
#include "plan_sim.hpp"

using namespace loom;
using loom::algo::RingParams;

namespace {

enum class Coll { AllReduce, AllGather, ReduceScatter, Broadcast, Reduce };

// Element i of rank r: the high part says which element, the low bits which rank, so a sum
// shows every contribution exactly once (for n <= 20).
std::int64_t value(int r, std::size_t i, int n) {
  return n <= 20 ? static_cast<std::int64_t>(i) * 10'000'000 + (std::int64_t{1} << r)
                 : static_cast<std::int64_t>(i) * 10'000'000 + r + 1;
}
std::int64_t sum_over_ranks(std::size_t i, int n) {
  std::int64_t s = 0;
  for (int r = 0; r < n; ++r) s += value(r, i, n);
  return s;
}

struct Case {
  Coll coll;
  int n;
  std::size_t count;
  bool in_place;
  int root = 0;
  std::size_t chunk_bytes = 64;
  std::size_t depth = 2;
  std::size_t min_part = 0;  // RingParams::min_step_part_bytes (0: whole chunks)
};

algo::Plan build(const Case& c, int r) {
  auto p = loom::test::plan_params<RingParams>(r, c.n, c.count, 8);
  p.chunk_bytes = c.chunk_bytes;
  p.depth = c.depth;
  p.min_step_part_bytes = c.min_part;
  p.in_place = c.in_place;
  p.root = c.root;
  // A ring order other than 0..n-1 for odd n, to exercise arbitrary orders.
  if (c.n % 2 == 1)
    for (int i = 0; i < c.n; ++i) p.order.push_back((i * 2) % c.n == i ? i : (c.n - 1 - i));
  if (!p.order.empty()) {
    std::vector<int> sorted = p.order;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) p.order.clear();
  }
  switch (c.coll) {
    case Coll::AllReduce: return algo::ring_allreduce(p);
    case Coll::AllGather: return algo::ring_allgather(p);
    case Coll::ReduceScatter: return algo::ring_reduce_scatter(p);
    case Coll::Broadcast: return algo::chain_broadcast(p);
    case Coll::Reduce: return algo::chain_reduce(p);
  }
  return {};
}

// Lays out send/recv in one memory block per rank, as in-place calls alias them.
void layout(const Case& c, int r, loom::test::SimRank& rk) {
  const std::size_t es = 8, n = static_cast<std::size_t>(c.n), ur = static_cast<std::size_t>(r);
  std::size_t send_elems = c.coll == Coll::ReduceScatter ? c.count * n : c.count;
  std::size_t recv_elems = c.coll == Coll::AllGather ? c.count * n : c.count;
  rk.send_bytes = send_elems * es;
  rk.recv_bytes = recv_elems * es;
  if (!c.in_place) {
    rk.send_off = 0;
    rk.recv_off = rk.send_bytes;
    rk.mem.assign(rk.send_bytes + rk.recv_bytes + 8, 0);
  } else if (c.coll == Coll::AllGather) {
    rk.recv_off = 0;
    rk.send_off = ur * c.count * es;
    rk.mem.assign(rk.recv_bytes + 8, 0);
  } else if (c.coll == Coll::ReduceScatter) {
    rk.send_off = 0;
    rk.recv_off = ur * c.count * es;
    rk.mem.assign(rk.send_bytes + 8, 0);
  } else {
    rk.send_off = rk.recv_off = 0;
    rk.mem.assign(std::max(rk.send_bytes, rk.recv_bytes) + 8, 0);
  }
  // Fill recv with garbage first, then send with the rank's values (in place, send wins).
  std::memset(rk.mem.data() + rk.recv_off, 0x5a, rk.recv_bytes);
  for (std::size_t i = 0; i < send_elems; ++i) {
    std::int64_t v = c.coll == Coll::Broadcast && r != c.root ? -1 : value(r, i, c.n);
    std::memcpy(rk.mem.data() + rk.send_off + i * es, &v, es);
  }
}

std::int64_t expected(const Case& c, int r, std::size_t i) {
  switch (c.coll) {
    case Coll::AllReduce:
    case Coll::Reduce: return sum_over_ranks(i, c.n);
    case Coll::AllGather: return value(static_cast<int>(i / c.count), i % c.count, c.n);
    case Coll::ReduceScatter: return sum_over_ranks(static_cast<std::size_t>(r) * c.count + i, c.n);
    case Coll::Broadcast: return value(c.root, i, c.n);
  }
  return 0;
}

void run_case(const Case& c) {
  std::vector<loom::test::SimRank> ranks(static_cast<std::size_t>(c.n));
  for (int r = 0; r < c.n; ++r) {
    auto& rk = ranks[static_cast<std::size_t>(r)];
    rk.plan = build(c, r);
    layout(c, r, rk);
    if (rk.plan.steps.size() < 1500) {
      std::string hz = loom::test::find_hazard(rk.plan, rk.send_off, rk.recv_off);
      INFO("rank " << r << " " << hz);
      REQUIRE(hz.empty());
    }
  }
  std::string err = loom::test::simulate(ranks, DataType::Int64, RedOp::Sum);
  REQUIRE(err.empty());
  for (int r = 0; r < c.n; ++r) {
    if (c.coll == Coll::Reduce && r != c.root) continue;
    auto& rk = ranks[static_cast<std::size_t>(r)];
    std::size_t elems = rk.recv_bytes / 8;
    for (std::size_t i = 0; i < elems; ++i) {
      std::int64_t got;
      std::memcpy(&got, rk.mem.data() + rk.recv_off + i * 8, 8);
      INFO("rank " << r << " element " << i);
      REQUIRE(got == expected(c, r, i));
    }
  }
}

}  // namespace

TEST_CASE("algorithms: every ring collective is exact over the plan simulator", "[algorithms]") {
  for (Coll coll :
       {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter, Coll::Broadcast, Coll::Reduce})
    for (int n : {1, 2, 3, 4, 5, 7, 8})
      for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{5}, std::size_t{13},
                                std::size_t{64}, std::size_t{101}})
        for (bool in_place : {false, true}) {
          Case c{coll, n, count, in_place};
          c.root = n > 1 ? static_cast<int>(count % static_cast<std::size_t>(n)) : 0;
          INFO("coll " << int(coll) << " n " << n << " count " << count << " in_place "
                       << in_place);
          run_case(c);
        }
}

TEST_CASE("algorithms: chunking and pipeline depth do not change results", "[algorithms]") {
  for (std::size_t chunk : {std::size_t{8}, std::size_t{24}, std::size_t{1000}})
    for (std::size_t depth : {std::size_t{1}, std::size_t{3}})
      for (Coll coll : {Coll::AllReduce, Coll::ReduceScatter, Coll::Reduce, Coll::AllGather})
        for (bool in_place : {false, true}) {
          Case c{coll, 5, 37, in_place, 2, chunk, depth};
          INFO("chunk " << chunk << " depth " << depth << " coll " << int(coll));
          run_case(c);
        }
}

std::size_t sends(const algo::Plan& plan) {
  return static_cast<std::size_t>(std::count_if(plan.steps.begin(), plan.steps.end(), [](auto& s) {
    return s.kind == algo::StepKind::Send;
  }));
}

TEST_CASE("algorithms: ring steps cut a small block into parts of a minimum size", "[algorithms]") {
  // 8-byte elements, chunk 1000 B, depth 3: a block of 48 B or more is cut into 3 parts.
  for (Coll coll : {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter})
    for (int n : {2, 3, 5, 8})
      for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{64}})
        for (bool in_place : {false, true}) {
          Case c{coll, n, count, in_place, 0, 1000, 3, 16};
          INFO("coll " << int(coll) << " n " << n << " count " << count);
          run_case(c);
        }
  // Allreduce of 8 x 6 elements at 8 ranks: each rank's block is 6 elements (48 B), 3 parts of
  // 16 B: 2 x 7 steps x 3 sends; a block under depth x the minimum part (48 < 3 x 24), no
  // minimum, or 2 ranks: whole blocks.
  auto ar = [](int n, std::size_t count, std::size_t min_part) {
    return sends(build(Case{Coll::AllReduce, n, count, false, 0, 1000, 3, min_part}, 0));
  };
  CHECK(ar(8, 48, 16) == 2 * 7 * 3);
  CHECK(ar(8, 48, 24) == 2 * 7);
  CHECK(ar(8, 72, 24) == 2 * 7 * 3);
  CHECK(ar(8, 48, 0) == 2 * 7);
  CHECK(ar(8, 48, 64) == 2 * 7);
  CHECK(ar(2, 12, 16) == 2);
  // Broadcast and reduce are chains: whole chunks whatever the minimum part.
  CHECK(sends(build(Case{Coll::Broadcast, 3, 48, false, 0, 1000, 3, 16}, 0)) == 1);
}

TEST_CASE("algorithms: large rings complete without deadlock", "[algorithms]") {
  for (int n : {16, 20, 64, 129})
    for (Coll coll :
         {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter, Coll::Broadcast, Coll::Reduce}) {
      Case c{coll, n, static_cast<std::size_t>(n) + 3, false, n / 3, 16, 2};
      INFO("n " << n << " coll " << int(coll));
      run_case(c);
    }
}

TEST_CASE("algorithms: dissemination barrier pairs every message", "[algorithms]") {
  for (int n = 1; n <= 33; ++n) {
    std::vector<loom::test::SimRank> ranks(static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r)
      ranks[static_cast<std::size_t>(r)].plan = algo::dissemination_barrier(r, n);
    INFO("n " << n);
    REQUIRE(loom::test::simulate(ranks, DataType::Uint8, RedOp::Sum).empty());
  }
}

TEST_CASE("algorithms: split_block covers the range in order", "[algorithms]") {
  for (std::size_t count : {0, 1, 7, 100})
    for (std::size_t parts : {1, 3, 8}) {
      std::size_t next = 0;
      for (std::size_t i = 0; i < parts; ++i) {
        auto b = algo::split_block(count, parts, i);
        REQUIRE(b.first == next);
        next += b.count;
      }
      REQUIRE(next == count);
    }
}
