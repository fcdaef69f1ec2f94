// Hierarchical allreduce: exact over the plan simulator for hosts of 1..4 ranks and 2..5 hosts
// (odd totals among them), in and out of place, zero, tiny and uneven counts, several chunks;
// no data hazards; every rank's float result bitwise identical. Through communicators whose
// thread ranks claim hosts (LOOM_HOST_ID): exact for every dtype x op, and hosts with different
// rank counts fall back to the ring, which the selector names.
#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "algorithms/hierarchical.hpp"
#include "comm_harness.hpp"
#include "plan_sim.hpp"
#include "reference.hpp"
#include "selector/selector.hpp"

using namespace loom;

namespace {

std::vector<std::vector<int>> hosts_of(int nhosts, int per_host) {
  std::vector<std::vector<int>> hosts(static_cast<std::size_t>(nhosts));
  for (int h = 0; h < nhosts; ++h)
    for (int i = 0; i < per_host; ++i)
      hosts[static_cast<std::size_t>(h)].push_back(h * per_host + i);
  return hosts;
}

// Every rank's plan run over the simulator on int64 inputs value(rank, i); returns the ranks.
std::vector<test::SimRank> run(const std::vector<std::vector<int>>& hosts, std::size_t count,
                               bool in_place, std::size_t chunk_bytes) {
  int n = 0;
  for (const auto& h : hosts) n += static_cast<int>(h.size());
  std::vector<test::SimRank> ranks(static_cast<std::size_t>(n));
  const std::size_t bytes = count * 8;
  for (int r = 0; r < n; ++r) {
    algo::HierParams p;
    p.rank = r;
    p.hosts = hosts;
    p.count = count;
    p.elem_size = 8;
    p.chunk_bytes = chunk_bytes;
    p.depth = 2;
    p.in_place = in_place;
    auto& rk = ranks[static_cast<std::size_t>(r)];
    rk.plan = algo::hierarchical_allreduce(p);
    rk.send_bytes = rk.recv_bytes = bytes;
    rk.recv_off = in_place ? 0 : bytes;
    rk.mem.assign(2 * bytes + 8, 0x5a);
    for (std::size_t i = 0; i < count; ++i) {
      const auto v = static_cast<std::int64_t>(i) * 10'000'000 + r * 7 + 1;
      std::memcpy(rk.mem.data() + i * 8, &v, 8);
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

}  // namespace

TEST_CASE("hier: allreduce is exact over the plan simulator", "[hier]") {
  for (int nhosts = 2; nhosts <= 5; ++nhosts)
    for (int per_host = 1; per_host <= 4; ++per_host)
      for (std::size_t count : {0, 1, 3, 7, 64, 1001})
        for (bool ip : {false, true}) {
          const int n = nhosts * per_host;
          INFO(nhosts << " hosts x " << per_host << ", count " << count << " in_place " << ip);
          auto ranks = run(hosts_of(nhosts, per_host), count, ip, 64);  // 8 elements a chunk
          for (int r = 0; r < n; ++r)
            for (std::size_t i = 0; i < count; ++i) {
              std::int64_t want = 0;
              for (int q = 0; q < n; ++q)
                want += static_cast<std::int64_t>(i) * 10'000'000 + q * 7 + 1;
              std::int64_t got = 0;
              std::memcpy(&got,
                          ranks[static_cast<std::size_t>(r)].mem.data() +
                              ranks[static_cast<std::size_t>(r)].recv_off + i * 8,
                          8);
              INFO("rank " << r << " element " << i);
              REQUIRE(got == want);
            }
        }
}

TEST_CASE("hier: hosts whose ranks are not numbered in blocks", "[hier]") {
  const std::vector<std::vector<int>> hosts = {{0, 3}, {1, 4}, {2, 5}};  // round-robin placement
  auto ranks = run(hosts, 37, false, 16);
  for (int r = 0; r < 6; ++r) {
    std::int64_t got = 0;
    std::memcpy(&got, ranks[static_cast<std::size_t>(r)].mem.data() + 37 * 8 + 36 * 8, 8);
    CHECK(got == 6 * (std::int64_t{36} * 10'000'000 + 1) + 7 * 15);
  }
}

TEST_CASE("hier: the schedule's fit and what crosses hosts", "[hier]") {
  CHECK(algo::hierarchical_unfit({{0, 1}}) == "one host");
  CHECK(algo::hierarchical_unfit({{0, 1}, {2}}) == "hosts hold different numbers of ranks");
  CHECK(algo::hierarchical_unfit({{0, 1}, {2, 3}}).empty());
  // At 4 hosts x 2 ranks each rank sends 2 (H - 1) / H of its shard (half the buffer) across
  // hosts: a host's NIC carries 2 (H - 1) / H of the buffer in all.
  algo::HierParams p;
  p.hosts = hosts_of(4, 2);
  p.count = 1 << 16;
  p.elem_size = 4;
  for (int r = 0; r < 8; ++r) {
    p.rank = r;
    const algo::Plan plan = algo::hierarchical_allreduce(p);
    std::size_t across = 0, within = 0;
    for (const algo::Step& s : plan.steps) {
      if (s.kind != algo::StepKind::Send) continue;
      (s.peer / 2 == r / 2 ? within : across) += s.src.bytes;
    }
    CHECK(across == 2 * 3 * (p.count * 4 / 2) / 4);
    CHECK(within == 2 * (p.count * 4 / 2));
    CHECK(plan.algorithm == "hier");
  }
}

namespace {

// Threads as ranks on the hosts `host_ids` name, with LOOM_ALGO=hier: every dtype x op, in and
// out of place, exact.
void run_comm(const std::vector<std::string>& host_ids) {
  const int n = static_cast<int>(host_ids.size());
  auto store = std::make_shared<bootstrap::InMemoryStore>();
  static std::uint64_t next_id = 0x41e7000;
  const std::uint64_t id = ++next_id;
  std::vector<std::string> errors(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        Communicator comm =
            test::make_comm(store, r, n, id,
                            {{"LOOM_TIMEOUT", "60s"},
                             {"LOOM_ALGO", "allreduce:hier"},
                             {"LOOM_CHUNK_SIZE", "1K"},
                             {"LOOM_HOST_ID", host_ids[static_cast<std::size_t>(r)]}});
        for (DataType dt : test::kAllTypes)
          for (RedOp op : test::ops_for(dt))
            for (std::size_t count : {std::size_t{0}, std::size_t{5}, std::size_t{1000}})
              for (bool ip : {false, true}) {
                const std::size_t es = dtype_size(dt);
                std::vector<std::uint8_t> in(count * es), out(count * es, 0xee), want(count * es);
                for (std::size_t i = 0; i < count; ++i) {
                  test::store_value(dt, in.data() + i * es, test::input_value(dt, op, r, i));
                  test::store_expected(dt, op, n, i, want.data() + i * es);
                }
                std::uint8_t* dst = ip ? in.data() : out.data();
                comm.allreduce(in.data(), dst, count, dt, op).wait();
                if (std::memcmp(dst, want.data(), count * es) != 0)
                  throw std::runtime_error("allreduce wrong: " + std::string(to_string(dt)) + " " +
                                           std::string(to_string(op)) + " count " +
                                           std::to_string(count) + (ip ? " in place" : ""));
              }
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r);
    REQUIRE(errors[static_cast<std::size_t>(r)].empty());
  }
}

}  // namespace

TEST_CASE("hier: allreduce through communicators is exact for every dtype x op", "[hier][comm]") {
  SECTION("2 hosts x 2 ranks") {
    run_comm({"a", "a", "b", "b"});
  }
  SECTION("3 hosts x 1 rank") {
    run_comm({"a", "b", "c"});
  }
  SECTION("hosts with different rank counts fall back to the ring") {
    run_comm({"a", "a", "b"});
  }
}

TEST_CASE("hier: the selector names why a forced hierarchical allreduce falls back",
          "[hier][selector]") {
  select::Shape s;
  s.nranks = 3;
  s.nhosts = 2;
  s.per_host = 2;
  s.uneven = true;
  const auto table = select::CostTable::build(s, select::Tuning{}, select::Pipeline{});
  const auto d = select::choose(select::Coll::AllReduce, 1 << 20, table, select::Algo::Hier);
  CHECK(d.algo != select::Algo::Hier);
  CHECK(d.us_of(select::Algo::Hier) < 0);
  CHECK_THAT(d.describe(select::Coll::AllReduce, 1 << 20, s),
             Catch::Matchers::Contains("different numbers of ranks"));
  s.uneven = false;
  s.nranks = 4;
  const auto even = select::CostTable::build(s, select::Tuning{}, select::Pipeline{});
  CHECK(select::choose(select::Coll::AllReduce, 1 << 20, even, select::Algo::Hier).algo ==
        select::Algo::Hier);
}
