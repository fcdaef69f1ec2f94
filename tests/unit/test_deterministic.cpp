// Deterministic mode: on random fp32 and bf16 (and, in the plan simulations, fp8 e4m3) inputs,
// allreduce, reduce and reduce_scatter give exactly the rank-order fold ((x0 + x1) + x2) + ...
// whatever the chunk size, pipeline depth, ring order, algorithm choice and host grouping, while
// the default ring and tree results differ from each other on the same inputs.
#include <catch2/catch.hpp>
#include <cstring>
#include <random>

#include "algorithms/deterministic.hpp"
#include "algorithms/ring.hpp"
#include "algorithms/tree.hpp"
#include "comm_harness.hpp"
#include "kernels/host/reduce.hpp"
#include "plan_sim.hpp"

using namespace loom;

namespace {

// Random values over many binades, so the summation order changes the rounding.
std::vector<std::uint8_t> random_input(DataType t, int rank, std::size_t count) {
  std::mt19937 gen(1234u + static_cast<unsigned>(rank) * 7919u);
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-12, 12);
  std::vector<std::uint8_t> out(count * dtype_size(t));
  for (std::size_t i = 0; i < count; ++i) {
    float v = std::ldexp(mant(gen), expo(gen));
    if (t == DataType::Float32) {
      std::memcpy(out.data() + i * 4, &v, 4);
    } else if (t == DataType::Float8E4M3) {
      // The binade compressed to [-3, 3] (sums of 8 ranks stay far below e4m3's 448; with 3
      // mantissa bits the summation order changes the rounding all the time).
      const int e = v == 0 ? 0 : std::ilogb(v);
      out[i] = kernels::float_to_fp8_e4m3(std::ldexp(v, e / 4 - e));
    } else {
      std::uint16_t b = kernels::float_to_bfloat16(v);
      std::memcpy(out.data() + i * 2, &b, 2);
    }
  }
  return out;
}

// The rank-order fold of element range [first, first + count) of every rank's input.
std::vector<std::uint8_t> fold(DataType t, int n, std::size_t total, std::size_t first,
                               std::size_t count) {
  const std::size_t es = dtype_size(t);
  std::vector<std::uint8_t> acc = random_input(t, 0, total);
  for (int q = 1; q < n; ++q) {
    auto x = random_input(t, q, total);
    kernels::reduce(t, RedOp::Sum, acc.data(), acc.data(), x.data(), total);
  }
  return {acc.begin() + static_cast<std::ptrdiff_t>(first * es),
          acc.begin() + static_cast<std::ptrdiff_t>((first + count) * es)};
}

enum class Kind { AllReduce, Reduce, ReduceScatter };

// Runs the deterministic plan of `kind` over the plan simulator; returns rank `look`'s result.
std::vector<std::uint8_t> sim_det(Kind kind, DataType t, int n, std::size_t count,
                                  std::size_t chunk, std::size_t depth, bool in_place,
                                  const std::vector<int>& order, int look) {
  const std::size_t es = dtype_size(t), un = static_cast<std::size_t>(n);
  std::vector<test::SimRank> ranks(un);
  const std::size_t send_elems = kind == Kind::ReduceScatter ? count * un : count;
  for (int r = 0; r < n; ++r) {
    auto p = test::plan_params<algo::RingParams>(r, n, count, es);
    p.order = order;
    p.chunk_bytes = chunk;
    p.depth = depth;
    p.in_place = in_place;
    p.root = look;
    auto& rk = ranks[static_cast<std::size_t>(r)];
    rk.plan = kind == Kind::AllReduce ? algo::deterministic_allreduce(p)
              : kind == Kind::Reduce  ? algo::deterministic_reduce(p)
                                      : algo::deterministic_reduce_scatter(p);
    rk.send_bytes = send_elems * es;
    rk.recv_bytes = count * es;
    rk.mem = random_input(t, r, send_elems);
    rk.mem.resize(rk.send_bytes + rk.recv_bytes, 0x77);
    rk.send_off = 0;
    rk.recv_off = in_place
                      ? (kind == Kind::ReduceScatter ? static_cast<std::size_t>(r) * count * es : 0)
                      : rk.send_bytes;
    if (rk.plan.steps.size() < 800)
      REQUIRE(test::find_hazard(rk.plan, rk.send_off, rk.recv_off).empty());
  }
  REQUIRE(test::simulate(ranks, t, RedOp::Sum).empty());
  auto& rk = ranks[static_cast<std::size_t>(look)];
  return {rk.mem.begin() + static_cast<std::ptrdiff_t>(rk.recv_off),
          rk.mem.begin() + static_cast<std::ptrdiff_t>(rk.recv_off + count * es)};
}

// Default-mode allreduce result of rank 0 with the ring or the tree.
std::vector<std::uint8_t> sim_default(bool tree, DataType t, int n, std::size_t count) {
  const std::size_t es = dtype_size(t);
  std::vector<test::SimRank> ranks(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    auto& rk = ranks[static_cast<std::size_t>(r)];
    if (tree) {
      rk.plan = algo::tree_allreduce(test::plan_params<algo::TreeParams>(r, n, count, es));
    } else {
      rk.plan = algo::ring_allreduce(test::plan_params<algo::RingParams>(r, n, count, es));
    }
    rk.mem = random_input(t, r, count);
    rk.send_bytes = rk.recv_bytes = count * es;
    rk.mem.resize(2 * count * es);
    rk.recv_off = count * es;
  }
  REQUIRE(test::simulate(ranks, t, RedOp::Sum).empty());
  return {ranks[0].mem.begin() + static_cast<std::ptrdiff_t>(count * es), ranks[0].mem.end()};
}

}  // namespace

TEST_CASE("deterministic: plans fold in rank order for any chunking, depth and ring order",
          "[deterministic]") {
  for (DataType t : {DataType::Float32, DataType::BFloat16, DataType::Float8E4M3})
    for (int n : {1, 2, 3, 5, 8})
      for (std::size_t count : {0, 1, 7, 61, 300})
        for (Kind kind : {Kind::AllReduce, Kind::Reduce, Kind::ReduceScatter})
          for (bool ip : {false, true}) {
            const int look = n - 1;
            std::vector<int> reversed;
            for (int i = n - 1; i >= 0; --i) reversed.push_back(i);
            std::size_t total =
                kind == Kind::ReduceScatter ? count * static_cast<std::size_t>(n) : count;
            std::size_t first =
                kind == Kind::ReduceScatter ? count * static_cast<std::size_t>(look) : 0;
            auto want = fold(t, n, total, first, count);
            INFO("dtype " << to_string(t) << " n " << n << " count " << count << " kind "
                          << int(kind) << " in_place " << ip);
            REQUIRE(sim_det(kind, t, n, count, 64, 2, ip, {}, look) == want);
            REQUIRE(sim_det(kind, t, n, count, 8, 1, ip, reversed, look) == want);
            REQUIRE(sim_det(kind, t, n, count, 4096, 4, ip, {}, look) == want);
          }
}

TEST_CASE("deterministic: the default ring and tree orders differ on the same inputs",
          "[deterministic]") {
  for (DataType t : {DataType::Float32, DataType::BFloat16, DataType::Float8E4M3}) {
    auto ring = sim_default(false, t, 7, 999);
    auto tree = sim_default(true, t, 7, 999);
    INFO("dtype " << to_string(t));
    REQUIRE(ring != tree);
    REQUIRE(ring != fold(t, 7, 999, 0, 999));
  }
}

namespace {

// n communicators in threads, each with its own settings (e.g. LOOM_HOST_ID per rank); returns
// every rank's allreduce result.
std::vector<std::vector<std::uint8_t>> comm_allreduce(
    int n, DataType t, std::size_t count, const std::map<std::string, std::string>& common,
    const std::vector<std::string>& host_ids) {
  auto store = std::make_shared<bootstrap::InMemoryStore>();
  static std::uint64_t next_id = 0xde7000;
  const std::uint64_t id = ++next_id;
  std::vector<std::vector<std::uint8_t>> out(static_cast<std::size_t>(n));
  std::vector<std::string> errors(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        auto settings = common;
        settings["LOOM_TIMEOUT"] = "60s";
        if (!host_ids.empty()) settings["LOOM_HOST_ID"] = host_ids[static_cast<std::size_t>(r)];
        Communicator comm = test::make_comm(store, r, n, id, settings);
        auto in = random_input(t, r, count);
        std::vector<std::uint8_t> res(in.size());
        comm.allreduce(in.data(), res.data(), count, t, RedOp::Sum).wait();
        out[static_cast<std::size_t>(r)] = std::move(res);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  for (auto& th : threads) th.join();
  for (const auto& e : errors) REQUIRE(e.empty());
  return out;
}

}  // namespace

TEST_CASE("deterministic: bitwise identical across algorithms, chunk sizes and host groupings",
          "[deterministic]") {
  const int n = 4;
  const std::size_t count = 20011;
  for (DataType t : {DataType::Float32, DataType::BFloat16}) {
    INFO("dtype " << to_string(t));
    const auto want = fold(t, n, count, 0, count);
    std::vector<std::map<std::string, std::string>> configs = {
        {{"LOOM_DETERMINISTIC", "1"}, {"LOOM_ALGO", "ring"}},
        {{"LOOM_DETERMINISTIC", "1"}, {"LOOM_ALGO", "tree"}},
        {{"LOOM_DETERMINISTIC", "1"}, {"LOOM_CHUNK_SIZE", "4K"}, {"LOOM_PIPELINE_DEPTH", "1"}},
        {{"LOOM_DETERMINISTIC", "1"}, {"LOOM_CHUNK_SIZE", "64K"}, {"LOOM_TRANSPORTS", "tcp"}},
    };
    for (const auto& cfg : configs)
      for (const auto& r : comm_allreduce(n, t, count, cfg, {})) REQUIRE(r == want);
    for (const std::vector<std::string>& hosts : {std::vector<std::string>{"a", "a", "b", "b"},
                                                  std::vector<std::string>{"a", "b", "a", "b"}})
      for (const auto& r : comm_allreduce(n, t, count, {{"LOOM_DETERMINISTIC", "1"}}, hosts))
        REQUIRE(r == want);
    // The default mode: ring and tree disagree on these inputs.
    auto ring = comm_allreduce(n, t, count, {{"LOOM_ALGO", "ring"}}, {});
    auto tree = comm_allreduce(n, t, count, {{"LOOM_ALGO", "tree"}}, {});
    REQUIRE(ring[0] != tree[0]);
  }
}
