// Large allreduces through the shared-memory arena in pieces (LOOM_SHM_TWOSHOT_PIECE,
// core/twoshot_task.*): the rank-order fold on every rank (the same bits as deterministic mode's
// messages and the one-step arena), in place and out of place, pieces and blocks of every
// shape (a last piece shorter than the rank count, counts not divisible by it), every dtype x op
// with averages and pre-multiplied sums; when it is chosen (3 ranks and more, above the one-step
// size, no algorithm forced); mixed with one-step and message calls; mismatched calls named on
// every rank; the setting's sizes and ranks that disagree on it.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "comm_harness.hpp"
#include "core/twoshot_task.hpp"
#include "reference.hpp"
#include "selector/plan_policy.hpp"

using namespace loom;
using loom::test::run_ranks;

namespace {

// Values over many binades: the order of a sum changes its rounding.
std::vector<float> random_floats(int rank, std::size_t count, unsigned salt) {
  std::mt19937 gen(7u + static_cast<unsigned>(rank) * 104729u + salt);
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-12, 12);
  std::vector<float> v(count);
  for (auto& x : v) x = std::ldexp(mant(gen), expo(gen));
  return v;
}

// ((x0 + x1) + x2) + ...
std::vector<float> rank_order_sum(int n, std::size_t count, unsigned salt) {
  std::vector<float> acc = random_floats(0, count, salt);
  for (int r = 1; r < n; ++r) {
    const auto x = random_floats(r, count, salt);
    for (std::size_t i = 0; i < count; ++i) acc[i] += x[i];
  }
  return acc;
}

std::string last_algorithm(const Communicator& comm) {
  const auto doc = nlohmann::json::parse(comm.flight_record());
  const auto& calls = doc.at("calls");
  return calls.empty() ? "" : calls.back().at("algorithm").get<std::string>();
}

// One-step calls up to 1 KiB per rank, pieces of 4 KiB per rank (1024 floats): small buffers
// take many pieces.
const std::map<std::string, std::string> kSmallPieces = {{"LOOM_SHM_ONESHOT_MAX", "1K"},
                                                         {"LOOM_SHM_TWOSHOT_PIECE", "4K"}};

}  // namespace

TEST_CASE("twoshot: pieces and blocks split every element once", "[twoshot]") {
  using B = detail::TwoShotTask::Block;
  for (std::size_t elems : {1, 2, 3, 7, 1000, 1024}) {
    for (int n : {3, 4, 5, 8}) {
      std::size_t next = 0;
      for (int r = 0; r < n; ++r) {
        const B b = detail::TwoShotTask::block_of(elems, r, n);
        CHECK(b.first == next);
        CHECK(b.elems <= elems / static_cast<std::size_t>(n) + 1);
        next = b.first + b.elems;
      }
      CHECK(next == elems);
    }
  }
  CHECK(detail::TwoShotTask::steps(1, 1024) == 2);
  CHECK(detail::TwoShotTask::steps(1024, 1024) == 2);
  CHECK(detail::TwoShotTask::steps(1025, 1024) == 4);
  CHECK(detail::TwoShotTask::steps(8193, 1024) == 18);
}

TEST_CASE("twoshot: large allreduces are the rank-order fold on every rank", "[twoshot][shm]") {
  for (int n : {2, 3, 4, 5}) {
    loom::test::Findings f;
    run_ranks(
        n,
        [&](Communicator& comm) {
          const int r = comm.rank();
          // 256 floats take one step; above, pieces of 1024 (the last one 1 to 1023 long, down
          // to fewer elements than ranks), at 2 ranks a ring.
          for (std::size_t count : {256, 257, 1024, 1025, 3 * 1024 + 2, 8193}) {
            const auto salt = static_cast<unsigned>(count);
            const std::vector<float> want = rank_order_sum(n, count, salt);
            auto in = random_floats(r, count, salt);
            std::vector<float> out(count, -1.0f);
            comm.allreduce(std::span<const float>(in), std::span<float>(out), RedOp::Sum).wait();
            const std::string algo = last_algorithm(comm);
            const std::string expect = count <= 256 ? "oneshot" : n >= 3 ? "twoshot" : "";
            const std::string what =
                fmt::format("rank {} of {}, {} floats ({})", r, n, count, algo);
            if (!expect.empty() && algo != expect) f.add(fmt::format("{}: not {}", what, expect));
            if (expect.empty() && (algo == "oneshot" || algo == "twoshot"))
              f.add(what + ": 2 ranks take messages");
            if (n >= 3 && std::memcmp(out.data(), want.data(), count * sizeof(float)) != 0)
              f.add(what + ": not the rank-order sum");
            comm.allreduce(std::span<float>(in), RedOp::Sum).wait();  // in place
            if (n >= 3 && std::memcmp(in.data(), want.data(), count * sizeof(float)) != 0)
              f.add(what + " in place: not the rank-order sum");
          }
        },
        kSmallPieces);
    INFO(f.first);
    CHECK(f.wrong == 0);
  }
}

TEST_CASE("twoshot: the same bits as deterministic mode's messages",
          "[twoshot][shm][deterministic]") {
  const int n = 5;
  const std::size_t count = 5000;
  std::vector<std::vector<float>> got(2, std::vector<float>(static_cast<std::size_t>(n) * count));
  for (int twoshot = 0; twoshot < 2; ++twoshot)
    run_ranks(
        n,
        [&](Communicator& comm) {
          auto in = random_floats(comm.rank(), count, 11);
          std::vector<float> out(count);
          comm.allreduce(std::span<const float>(in), std::span<float>(out), RedOp::Sum).wait();
          CHECK((last_algorithm(comm) == "twoshot") == (twoshot == 1));
          std::memcpy(got[static_cast<std::size_t>(twoshot)].data() +
                          static_cast<std::size_t>(comm.rank()) * count,
                      out.data(), count * sizeof(float));
        },
        {{"LOOM_DETERMINISTIC", "1"},
         {"LOOM_SHM_ONESHOT_MAX", "1K"},
         {"LOOM_SHM_TWOSHOT_PIECE", twoshot ? "4K" : "0"}});
  CHECK(std::memcmp(got[0].data(), got[1].data(), got[0].size() * sizeof(float)) == 0);
}

TEST_CASE("twoshot: every dtype and op, averages and pre-multiplied sums",
          "[twoshot][shm][redops]") {
  const int n = 3;
  loom::test::Findings f;
  run_ranks(
      n,
      [&](Communicator& comm) {
        const int r = comm.rank();
        for (DataType t : test::kAllTypes) {
          const std::size_t es = dtype_size(t);
          // Above the one-step size in every type (1 KiB), over three pieces of 4 KiB.
          const std::size_t count = std::size_t{2} * 4096 / es + 5;
          for (RedOp op : test::kAllOps) {
            if (!supports(t, op)) continue;
            std::vector<std::uint8_t> in(count * es), out(count * es, 0xee), want(count * es);
            test::fill_input(t, op, r, in.data(), count);
            for (std::size_t i = 0; i < count; ++i)
              test::store_expected(t, op, n, i, want.data() + i * es);
            CollOptions opts;
            if (op == RedOp::PreMulSum) opts.scalar = 1.0;  // scaled below
            comm.allreduce(in.data(), out.data(), count, t, op, opts).wait();
            const std::string what =
                fmt::format("rank {}: {} x {}, {}", r, count, to_string(t), to_string(op));
            if (last_algorithm(comm) != "twoshot") f.add(what + ": not twoshot");
            if (out != want) f.add(what + ": wrong");
            comm.allreduce(in.data(), in.data(), count, t, op, opts).wait();  // in place
            if (in != want) f.add(what + " in place: wrong");
          }
        }
        // Each rank scales its own input: 0.5 (r + 1) x 4 summed over 3 ranks is 12.
        CollOptions scaled;
        scaled.scalar = 0.5 * (r + 1);
        std::vector<float> y(3000, 4.0f);
        comm.allreduce(std::span<float>(y), RedOp::PreMulSum, scaled).wait();
        if (y.front() != 12.0f || y.back() != 12.0f)
          f.add(fmt::format("rank {}: premulsum {}", r, y.back()));
        std::vector<double> x(3000, 2.0 * (r + 1)), avg(3000);
        comm.allreduce(std::span<const double>(x), std::span<double>(avg), RedOp::Avg).wait();
        if (avg.front() != 4.0 || avg.back() != 4.0)
          f.add(fmt::format("rank {}: avg {}", r, avg[0]));
      },
      kSmallPieces);
  INFO(f.first);
  CHECK(f.wrong == 0);
}

TEST_CASE("twoshot: mixed with one-step and message calls, many in flight", "[twoshot][shm]") {
  const int n = 4;
  loom::test::Findings f;
  run_ranks(
      n,
      [&](Communicator& comm) {
        const int r = comm.rank();
        for (int round = 0; round < 20; ++round) {
          std::vector<std::int64_t> small(3, round + r), big(3000, round * 10 + r);
          std::vector<std::int32_t> gathered(static_cast<std::size_t>(n) * 2000);
          std::vector<std::int32_t> mine(2000, r + round);
          std::vector<Work> works;
          works.push_back(comm.allreduce(std::span<std::int64_t>(big), RedOp::Sum));    // twoshot
          works.push_back(comm.allreduce(std::span<std::int64_t>(small), RedOp::Max));  // oneshot
          works.push_back(comm.allgather(std::span<const std::int32_t>(mine),           // messages
                                         std::span<std::int32_t>(gathered)));
          works.push_back(comm.allreduce(std::span<std::int64_t>(big), RedOp::Min));  // twoshot
          for (auto& w : works) w.wait();
          const std::int64_t sum = n * round * 10 + n * (n - 1) / 2;
          if (big.front() != sum || big.back() != sum)
            f.add(fmt::format("rank {} round {}: big {}", r, round, big.back()));
          if (small[2] != round + n - 1) f.add(fmt::format("rank {} round {}: small", r, round));
          if (gathered.back() != n - 1 + round)
            f.add(fmt::format("rank {} round {}: allgather", r, round));
        }
      },
      kSmallPieces);
  INFO(f.first);
  CHECK(f.wrong == 0);
}

TEST_CASE("twoshot: a forced algorithm or 0 takes messages", "[twoshot][shm]") {
  for (const auto& setting :
       std::vector<std::pair<std::string, std::string>>{{"LOOM_ALGO", "ring"},
                                                        {"LOOM_ALGO", "allreduce:tree"},
                                                        {"LOOM_SHM_TWOSHOT_PIECE", "0"}}) {
    run_ranks(3,
              [&](Communicator& comm) {
                std::vector<float> v(2000, 1.0f);
                comm.allreduce(std::span<float>(v), RedOp::Sum).wait();
                INFO(setting.first << "=" << setting.second);
                CHECK(last_algorithm(comm) != "twoshot");
                CHECK(v.back() == 3.0f);
              },
              {{"LOOM_SHM_ONESHOT_MAX", "1K"}, setting});
  }
  run_ranks(
      3,
      [&](Communicator& comm) {
        std::vector<float> v(2000, 1.0f);
        CollOptions ring;
        ring.algorithm = Algorithm::Ring;
        comm.allreduce(std::span<float>(v), RedOp::Sum, ring).wait();
        CHECK(last_algorithm(comm) == "ring");
        comm.allreduce(std::span<float>(v), RedOp::Sum).wait();
        CHECK(last_algorithm(comm) == "twoshot");
        CHECK(v.back() == 9.0f);
      },
      kSmallPieces);
}

TEST_CASE("twoshot: a mismatched call names both ranks and both calls",
          "[twoshot][shm][mismatch]") {
  std::vector<std::string> errors(3);
  run_ranks(
      3,
      [&](Communicator& comm) {
        // Rank 2's call is one element longer: the first piece's slots differ in their call.
        const std::size_t count = comm.rank() == 2 ? 3001 : 3000;
        std::vector<float> v(count, 1.0f);
        auto e =
            loom::test::error_of([&] { comm.allreduce(std::span<float>(v), RedOp::Sum).wait(); });
        if (e && e->code() == ErrorCode::Mismatch)
          errors[static_cast<std::size_t>(comm.rank())] = e->what();
      },
      kSmallPieces);
  CHECK_THAT(errors[0], Catch::Contains("rank 0 expected allreduce #0 (3000 x float, sum)") &&
                            Catch::Contains("allreduce #0 (3001 x float, sum)") &&
                            Catch::Contains("[twoshot]"));
  CHECK_THAT(errors[2], Catch::Contains("rank 2 expected allreduce #0 (3001 x float, sum)") &&
                            Catch::Contains("from rank 0"));
}

TEST_CASE("twoshot: a rank that never calls makes the others time out naming it and the step",
          "[twoshot][shm][timeout]") {
  std::atomic<int> timed_out{0};
  std::vector<std::string> errors(3);
  auto settings = kSmallPieces;
  settings["LOOM_TIMEOUT"] = "1500ms";
  run_ranks(
      3,
      [&](Communicator& comm) {
        if (comm.rank() == 2) {  // alive, its arena mapped, but never calling
          while (timed_out.load() < 2) std::this_thread::yield();
          return;
        }
        std::vector<float> v(5000, 1.0f);
        auto e =
            loom::test::error_of([&] { comm.allreduce(std::span<float>(v), RedOp::Sum).wait(); });
        ++timed_out;
        while (timed_out.load() < 2) std::this_thread::yield();  // both time out, not PeerFailed
        if (e && e->code() == ErrorCode::Timeout)
          errors[static_cast<std::size_t>(comm.rank())] = e->what();
      },
      settings);
  for (int r = 0; r < 2; ++r)
    CHECK_THAT(
        errors[static_cast<std::size_t>(r)],
        Catch::Contains(fmt::format("rank {}: allreduce #0 (5000 x float, sum) [twoshot]", r)) &&
            Catch::Contains(
                fmt::format("rank {} waits for rank 2's reduce step of piece 1 of 5 in the "
                            "shared-memory arena",
                            r)));
}

TEST_CASE("twoshot: ranks that set LOOM_SHM_TWOSHOT_PIECE differently are told",
          "[twoshot][shm][config]") {
  auto store = std::make_shared<bootstrap::InMemoryStore>();
  std::vector<std::string> errors(3);
  loom::test::on_rank_threads(3, [&](int r) {
    auto e = loom::test::error_of([&] {
      Communicator c = loom::test::make_comm(
          store, r, 3, 0x2507,
          {{"LOOM_TIMEOUT", "20s"}, {"LOOM_SHM_TWOSHOT_PIECE", r == 0 ? "64K" : "auto"}});
    });
    if (e) errors[static_cast<std::size_t>(r)] = e->what();
  });
  CHECK_THAT(errors[1], Catch::Contains("LOOM_SHM_TWOSHOT_PIECE=auto here but "
                                        "LOOM_SHM_TWOSHOT_PIECE=64K on rank 0"));
}

TEST_CASE("twoshot: LOOM_SHM_TWOSHOT_PIECE's sizes", "[twoshot][config]") {
  using select::twoshot_piece_from;
  auto piece_of = [](const std::string& text, int n) {
    auto r = twoshot_piece_from(text, n);
    return r.is_ok() ? *r : ~std::size_t{0};
  };
  CHECK(piece_of("auto", 2) == 0);  // 2 ranks: rings
  CHECK(piece_of("auto", 3) == std::size_t{256} << 10);
  CHECK(piece_of("auto", 32) == std::size_t{256} << 10);
  CHECK(piece_of("auto", 64) == std::size_t{128} << 10);
  CHECK(piece_of("auto", 3000) == 4096);  // never below 4 KiB
  CHECK(piece_of("0", 4) == 0);
  CHECK(piece_of("4K", 4) == 4096);
  CHECK(piece_of("5000", 4) == 4992);  // down to 64 bytes
  CHECK(piece_of("1M", 64) == std::size_t{1} << 20);
  for (const char* bad : {"", "banana", "2M", "100", "-1"}) {
    INFO(bad);
    auto r = twoshot_piece_from(bad, 4);
    REQUIRE(!r.is_ok());
    CHECK_THAT(r.status().message(), Catch::Contains("LOOM_SHM_TWOSHOT_PIECE"));
  }
}
