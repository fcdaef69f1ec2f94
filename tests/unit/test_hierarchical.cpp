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

namespace {

std::int64_t hier_value(int r, std::size_t i) {
  return static_cast<std::int64_t>(i) * 10'000'000 + (std::int64_t{1} << r);
}

// Allgather (`gather`) or reduce-scatter of `count` int64 per rank over the plan simulator.
std::vector<test::SimRank> hier_run_blocks(const std::vector<std::vector<int>>& hosts, bool gather,
                                           std::size_t count, bool in_place,
                                           std::size_t chunk_bytes) {
  int n = 0;
  for (const auto& h : hosts) n += static_cast<int>(h.size());
  std::vector<test::SimRank> ranks(static_cast<std::size_t>(n));
  const std::size_t block = count * 8, all = block * static_cast<std::size_t>(n);
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
    rk.plan = gather ? algo::hierarchical_allgather(p) : algo::hierarchical_reduce_scatter(p);
    rk.send_bytes = gather ? block : all;
    rk.recv_bytes = gather ? all : block;
    const std::size_t own = static_cast<std::size_t>(r) * block;
    rk.send_off = in_place && gather ? own : 0;
    rk.recv_off = in_place ? (gather ? 0 : own) : rk.send_bytes;
    rk.mem.assign(in_place ? all + 8 : rk.send_bytes + rk.recv_bytes + 8, 0);
    std::memset(rk.mem.data() + rk.recv_off, 0x5a, rk.recv_bytes);
    for (std::size_t i = 0; i < rk.send_bytes / 8; ++i) {
      const std::int64_t v = hier_value(r, i);
      std::memcpy(rk.mem.data() + rk.send_off + i * 8, &v, 8);
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

void hier_check_blocks(const std::vector<std::vector<int>>& hosts, std::size_t count, bool ip,
                       std::size_t chunk_bytes) {
  const auto gathered = hier_run_blocks(hosts, true, count, ip, chunk_bytes);
  const auto scattered = hier_run_blocks(hosts, false, count, ip, chunk_bytes);
  const int n = static_cast<int>(gathered.size());
  for (int r = 0; r < n; ++r) {
    const auto& g = gathered[static_cast<std::size_t>(r)];
    const auto& sc = scattered[static_cast<std::size_t>(r)];
    for (std::size_t i = 0; i < count * static_cast<std::size_t>(n); ++i) {
      std::int64_t got = 0;
      std::memcpy(&got, g.mem.data() + g.recv_off + i * 8, 8);
      INFO("allgather rank " << r << " element " << i);
      REQUIRE(got == hier_value(static_cast<int>(i / count), i % count));
    }
    for (std::size_t i = 0; i < count; ++i) {
      std::int64_t want = 0, got = 0;
      for (int q = 0; q < n; ++q) want += hier_value(q, static_cast<std::size_t>(r) * count + i);
      std::memcpy(&got, sc.mem.data() + sc.recv_off + i * 8, 8);
      INFO("reduce-scatter rank " << r << " element " << i);
      REQUIRE(got == want);
    }
  }
}

}  // namespace

TEST_CASE("hier: allgather and reduce-scatter are exact over the plan simulator", "[hier]") {
  for (int nhosts = 2; nhosts <= 5; ++nhosts)
    for (int per_host = 1; per_host <= 4; ++per_host)
      for (std::size_t count : {0, 1, 3, 7, 61})
        for (bool ip : {false, true}) {
          INFO(nhosts << " hosts x " << per_host << ", count " << count << " in_place " << ip);
          hier_check_blocks(hosts_of(nhosts, per_host), count, ip, 16);  // 2 elements a chunk
        }
  // Hosts whose ranks are not numbered in blocks.
  hier_check_blocks({{0, 3}, {1, 4}, {2, 5}}, 9, false, 24);
  hier_check_blocks({{4, 0, 2}, {1, 5, 3}}, 5, true, 8);
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
    // Allgather and reduce-scatter: each rank's block crosses to the 3 other hosts once, so a
    // host's NIC carries 2 x 3 blocks of the 8, (H - 1) / H of the gathered buffer.
    for (bool gather : {true, false}) {
      const algo::Plan g =
          gather ? algo::hierarchical_allgather(p) : algo::hierarchical_reduce_scatter(p);
      std::size_t out = 0;
      for (const algo::Step& s : g.steps)
        if (s.kind == algo::StepKind::Send && s.peer / 2 != r / 2) out += s.src.bytes;
      CHECK(out == 3 * p.count * 4);
    }
  }
}

namespace {

// Allgather (op Sum's inputs) and reduce-scatter of `count` per rank, checked exactly.
void hier_check_gathers(Communicator& comm, DataType dt, RedOp op, std::size_t count, bool ip) {
  const int n = comm.size(), r = comm.rank();
  const std::size_t es = dtype_size(dt), un = static_cast<std::size_t>(n);
  const std::size_t own = static_cast<std::size_t>(r) * count * es;
  std::vector<std::uint8_t> all(count * es * un + 1, 0xee), in(count * es + 1), want(8);
  void* src = ip ? all.data() + own : in.data();
  test::fill_input(dt, RedOp::Sum, r, src, count);
  comm.allgather(src, all.data(), count, dt).wait();
  for (std::size_t q = 0; q < un; ++q)
    for (std::size_t i = 0; i < count; ++i) {
      test::store_value(dt, want.data(), test::input_value(dt, RedOp::Sum, static_cast<int>(q), i));
      if (std::memcmp(all.data() + (q * count + i) * es, want.data(), es) != 0)
        throw std::runtime_error("allgather wrong: " + std::string(to_string(dt)) + " count " +
                                 std::to_string(count) + (ip ? " in place" : ""));
    }
  test::fill_input(dt, op, r, all.data(), count * un);
  std::vector<std::uint8_t> out(count * es + 1, 0xee);
  std::uint8_t* dst = ip ? all.data() + own : out.data();
  comm.reduce_scatter(all.data(), dst, count, dt, op).wait();
  for (std::size_t i = 0; i < count; ++i) {
    test::store_expected(dt, op, n, static_cast<std::size_t>(r) * count + i, want.data());
    if (std::memcmp(dst + i * es, want.data(), es) != 0)
      throw std::runtime_error("reduce_scatter wrong: " + std::string(to_string(dt)) + " " +
                               std::string(to_string(op)) + " count " + std::to_string(count) +
                               (ip ? " in place" : ""));
  }
}

// Threads as ranks on the hosts `host_ids` name, with LOOM_ALGO=hier: allreduce, allgather and
// reduce_scatter for every dtype x op, in and out of place, exact.
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
                             {"LOOM_ALGO", "hier"},
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
                hier_check_gathers(comm, dt, op, count, ip);
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

TEST_CASE("hier: allreduce, allgather, reduce_scatter through communicators are exact",
          "[hier][comm]") {
  SECTION("2 hosts x 2 ranks") {
    run_comm({"a", "a", "b", "b"});
  }
  SECTION("3 hosts x 1 rank") {
    run_comm({"a", "b", "c"});
  }
  SECTION("2 hosts x 3 ranks, placed round-robin") {
    run_comm({"a", "b", "a", "b", "a", "b"});
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
