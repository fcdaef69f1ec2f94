// Large allreduces, allgathers and reduce_scatters through the shared-memory arena in pieces
// (LOOM_SHM_ARENA_PIECE, core/arena_pieces_task.*): allreduce ("twoshot") is the rank-order fold
// on every rank (the same bits as deterministic mode's messages and the one-step arena), in place
// and out of place, pieces and blocks of every shape (a last piece shorter than the rank count,
// counts not divisible by it), every dtype x op with averages and pre-multiplied sums;
// allgather and reduce_scatter ("pieces") exact the same ways; when they are chosen (3 ranks and
// more, above the one-step size, no algorithm forced); mixed with one-step and message calls;
// mismatched calls and a missing rank named on every rank; the setting's sizes and ranks that
// disagree on it.
#include <catch2/catch.hpp>
#include <cstring>
#include <map>
#include <thread>

#include "arena_helpers.hpp"
#include "comm_harness.hpp"
#include "core/arena_pieces_task.hpp"
#include "reference.hpp"
#include "selector/plan_policy.hpp"

using namespace loom;
using loom::test::last_algorithm;
using loom::test::random_floats;
using loom::test::rank_order_sum;
using loom::test::run_ranks;

namespace {

// One-step calls up to 1 KiB per rank, pieces of 4 KiB per rank (1024 floats): small buffers
// take many pieces.
const std::map<std::string, std::string> kSmallPieces = {{"LOOM_SHM_ONESHOT_MAX", "1K"},
                                                         {"LOOM_SHM_ARENA_PIECE", "4K"}};

}  // namespace

TEST_CASE("arena pieces: pieces and blocks split every element once", "[arena_pieces]") {
  using T = detail::ArenaPiecesTask;
  using B = T::Block;
  for (std::size_t elems : {1, 2, 3, 7, 1000, 1024}) {
    for (int n : {3, 4, 5, 8}) {
      std::size_t next = 0;
      for (int r = 0; r < n; ++r) {
        const B b = T::block_of(elems, r, n);
        CHECK(b.first == next);
        CHECK(b.elems <= elems / static_cast<std::size_t>(n) + 1);
        next = b.first + b.elems;
      }
      CHECK(next == elems);
    }
  }
  coll::OpDesc ar;
  ar.kind = coll::CollKind::AllReduce;
  ar.dtype = DataType::Float32;
  for (auto [count, steps] : {std::pair{1, 2}, {1024, 2}, {1025, 4}, {8193, 18}}) {
    ar.count = static_cast<std::size_t>(count);
    CHECK(T::steps(ar, 1024) == static_cast<std::uint64_t>(steps));
  }
  coll::OpDesc ag = ar;
  ag.kind = coll::CollKind::AllGather;
  ag.count = 8193;
  CHECK(T::steps(ag, 1024) == 9);  // one step per piece
  CHECK(T::piece_elems(ar, 4, 4096) == 1024);
  CHECK(T::piece_elems(ag, 4, 4096) == 1024);
  coll::OpDesc rs = ar;
  rs.kind = coll::CollKind::ReduceScatter;
  CHECK(T::piece_elems(rs, 4, 4096) == 256);  // a piece of each of the 4 blocks
  CHECK(T::piece_elems(rs, 3, 4096) == 0);    // as many bytes as the ring at 3 ranks
  CHECK(T::piece_elems(ag, 3, 4096) == 1024);
  CHECK(T::piece_elems(ar, 2, 4096) == 0);     // 2 ranks: rings
  CHECK(T::piece_elems(rs, 2000, 4096) == 0);  // not one float per block
  coll::OpDesc bc = ar;
  bc.kind = coll::CollKind::Broadcast;
  CHECK(T::piece_elems(bc, 4, 4096) == 0);  // not served
}

TEST_CASE("arena pieces: large allreduces are the rank-order fold on every rank",
          "[arena_pieces][shm]") {
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

TEST_CASE("arena pieces: the same bits as deterministic mode's messages",
          "[arena_pieces][shm][deterministic]") {
  const int n = 5;
  const std::size_t count = 5000;
  std::vector<std::vector<float>> got(2, std::vector<float>(static_cast<std::size_t>(n) * count));
  std::vector<std::vector<float>> rs(2, std::vector<float>(count));
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
          // reduce_scatter of the same values, in blocks of count / n
          const std::size_t block = count / n;
          std::vector<float> mine(block);
          comm.reduce_scatter(in.data(), mine.data(), block, DataType::Float32, RedOp::Sum).wait();
          CHECK((last_algorithm(comm) == "pieces") == (twoshot == 1));
          std::memcpy(rs[static_cast<std::size_t>(twoshot)].data() +
                          static_cast<std::size_t>(comm.rank()) * block,
                      mine.data(), block * sizeof(float));
        },
        {{"LOOM_DETERMINISTIC", "1"},
         {"LOOM_SHM_ONESHOT_MAX", "1K"},
         {"LOOM_SHM_ARENA_PIECE", twoshot ? "4K" : "0"}});
  CHECK(std::memcmp(got[0].data(), got[1].data(), got[0].size() * sizeof(float)) == 0);
  CHECK(std::memcmp(rs[0].data(), rs[1].data(), rs[0].size() * sizeof(float)) == 0);
}

TEST_CASE("arena pieces: every dtype and op, averages and pre-multiplied sums",
          "[arena_pieces][shm][redops]") {
  const int n = 4;  // reduce_scatter takes pieces from 4 ranks
  loom::test::Findings f;
  run_ranks(
      n,
      [&](Communicator& comm) {
        const int r = comm.rank();
        for (DataType t : test::kAllTypes) {
          const std::size_t es = dtype_size(t);
          // Above the one-step size in every type (1 KiB), over three pieces of 4 KiB (of
          // 1 KiB per block for reduce_scatter: about nine).
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
            // reduce_scatter of blocks of `count`: this rank's block spans three pieces too
            const std::size_t all = static_cast<std::size_t>(n) * count;
            std::vector<std::uint8_t> rs_in(all * es), rs_out(count * es, 0xee);
            test::fill_input(t, op, r, rs_in.data(), all);
            const std::size_t mine = static_cast<std::size_t>(r) * count;
            for (std::size_t i = 0; i < count; ++i)
              test::store_expected(t, op, n, mine + i, want.data() + i * es);
            comm.reduce_scatter(rs_in.data(), rs_out.data(), count, t, op, opts).wait();
            if (last_algorithm(comm) != "pieces") f.add(what + ": reduce_scatter not in pieces");
            if (rs_out != want) f.add(what + ": reduce_scatter wrong");
            comm.reduce_scatter(rs_in.data(), rs_in.data() + mine * es, count, t, op, opts).wait();
            if (std::memcmp(rs_in.data() + mine * es, want.data(), count * es) != 0)
              f.add(what + ": reduce_scatter in place wrong");
          }
        }
        // Each rank scales its own input: 0.5 (r + 1) x 4 summed over 4 ranks is 20.
        CollOptions scaled;
        scaled.scalar = 0.5 * (r + 1);
        std::vector<float> y(3000, 4.0f);
        comm.allreduce(std::span<float>(y), RedOp::PreMulSum, scaled).wait();
        if (y.front() != 20.0f || y.back() != 20.0f)
          f.add(fmt::format("rank {}: premulsum {}", r, y.back()));
        std::vector<double> x(3000, 2.0 * (r + 1)), avg(3000);
        comm.allreduce(std::span<const double>(x), std::span<double>(avg), RedOp::Avg).wait();
        if (avg.front() != 5.0 || avg.back() != 5.0)  // (2 + 4 + 6 + 8) / 4
          f.add(fmt::format("rank {}: avg {}", r, avg[0]));
      },
      kSmallPieces);
  INFO(f.first);
  CHECK(f.wrong == 0);
}

TEST_CASE("arena pieces: allgather and reduce_scatter exact in place and out of place",
          "[arena_pieces][shm]") {
  for (int n : {2, 3, 4, 5}) {
    loom::test::Findings f;
    run_ranks(
        n,
        [&](Communicator& comm) {
          const int r = comm.rank();
          const auto un = static_cast<std::size_t>(n);
          // allgather takes pieces from 3 ranks, reduce_scatter from 4
          auto check = [&](bool ok, const std::string& what, int from) {
            const std::string algo = last_algorithm(comm);
            if (!ok) f.add(fmt::format("rank {} of {}: {} ({})", r, n, what, algo));
            if ((n >= from) != (algo == "pieces"))
              f.add(fmt::format("rank {} of {}: {}: took {}", r, n, what, algo));
          };
          // Pieces of 1024 int32 for allgather, of 4096 / (4 n) per block for reduce_scatter:
          // one piece, several, and a last piece of one element.
          for (std::size_t count : {300, 1024, 1025, 3000}) {
            const std::string c = fmt::format(" of {}", count);
            auto val = [](std::size_t q, std::size_t i) {
              return static_cast<std::int32_t>(q * 100000 + i);
            };
            std::vector<std::int32_t> mine(count), all(un * count, -1);
            for (std::size_t i = 0; i < count; ++i) mine[i] = val(static_cast<std::size_t>(r), i);
            comm.allgather(std::span<const std::int32_t>(mine), std::span<std::int32_t>(all))
                .wait();
            bool ok = true;
            for (std::size_t q = 0; q < un; ++q)
              for (std::size_t i = 0; i < count; ++i) ok = ok && all[q * count + i] == val(q, i);
            check(ok, "allgather" + c, 3);
            std::vector<std::int32_t> inplace(un * count, -1);
            std::copy(
                mine.begin(), mine.end(),
                inplace.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(r) * count));
            comm.allgather(inplace.data() + static_cast<std::size_t>(r) * count, inplace.data(),
                           count, DataType::Int32)
                .wait();
            check(inplace == all, "allgather in place" + c, 3);
            // reduce_scatter: element i of block b from rank q is q * 1000 + b * 7 + i
            const std::size_t rc = count / 3 + 1;  // 101 .. 1001 per block
            std::vector<std::int64_t> in(un * rc), out(rc, -1);
            for (std::size_t b = 0; b < un; ++b)
              for (std::size_t i = 0; i < rc; ++i)
                in[b * rc + i] = std::int64_t{r} * 1000 + static_cast<std::int64_t>(b * 7 + i);
            comm.reduce_scatter(in.data(), out.data(), rc, DataType::Int64, RedOp::Sum).wait();
            ok = true;
            for (std::size_t i = 0; i < rc; ++i)
              ok = ok &&
                   out[i] == 1000 * n * (n - 1) / 2 +
                                 n * static_cast<std::int64_t>(static_cast<std::size_t>(r) * 7 + i);
            check(ok, fmt::format("reduce_scatter of {}", rc), 4);
            comm.reduce_scatter(in.data(), in.data() + static_cast<std::size_t>(r) * rc, rc,
                                DataType::Int64, RedOp::Max)
                .wait();
            ok = true;
            for (std::size_t i = 0; i < rc; ++i)
              ok = ok && in[static_cast<std::size_t>(r) * rc + i] ==
                             std::int64_t{n - 1} * 1000 +
                                 static_cast<std::int64_t>(static_cast<std::size_t>(r) * 7 + i);
            check(ok, fmt::format("reduce_scatter in place of {}", rc), 4);
          }
        },
        kSmallPieces);
    INFO(f.first);
    CHECK(f.wrong == 0);
  }
}

TEST_CASE("arena pieces: mixed with one-step and message calls, many in flight",
          "[arena_pieces][shm]") {
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

TEST_CASE("arena pieces: a forced algorithm or 0 takes messages", "[arena_pieces][shm]") {
  for (const auto& setting : std::vector<std::pair<std::string, std::string>>{
           {"LOOM_ALGO", "ring"}, {"LOOM_ALGO", "allreduce:tree"}, {"LOOM_SHM_ARENA_PIECE", "0"}}) {
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

TEST_CASE("arena pieces: a mismatched call names both ranks and both calls",
          "[arena_pieces][shm][mismatch]") {
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

TEST_CASE("arena pieces: an allgather of another count is a mismatch on every rank",
          "[arena_pieces][shm][mismatch]") {
  std::vector<std::string> errors(3);
  run_ranks(
      3,
      [&](Communicator& comm) {
        const std::size_t count = comm.rank() == 1 ? 2000 : 2048;
        std::vector<float> mine(count, 1.0f), all(3 * count);
        auto e = loom::test::error_of(
            [&] { comm.allgather(std::span<const float>(mine), std::span<float>(all)).wait(); });
        if (e && e->code() == ErrorCode::Mismatch)
          errors[static_cast<std::size_t>(comm.rank())] = e->what();
      },
      kSmallPieces);
  for (const auto& e : errors)
    CHECK_THAT(e, Catch::Contains("allgather #0 (2048 x float)") &&
                      Catch::Contains("allgather #0 (2000 x float)") &&
                      Catch::Contains("[pieces]"));
}

TEST_CASE("arena pieces: a rank that never calls makes the others time out naming it and the step",
          "[arena_pieces][shm][timeout]") {
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

TEST_CASE("arena pieces: ranks that set LOOM_SHM_ARENA_PIECE differently are told",
          "[arena_pieces][shm][config]") {
  auto store = std::make_shared<bootstrap::InMemoryStore>();
  std::vector<std::string> errors(3);
  loom::test::on_rank_threads(3, [&](int r) {
    auto e = loom::test::error_of([&] {
      Communicator c = loom::test::make_comm(
          store, r, 3, 0x2507,
          {{"LOOM_TIMEOUT", "20s"}, {"LOOM_SHM_ARENA_PIECE", r == 0 ? "64K" : "auto"}});
    });
    if (e) errors[static_cast<std::size_t>(r)] = e->what();
  });
  CHECK_THAT(errors[1], Catch::Contains("LOOM_SHM_ARENA_PIECE=auto here but "
                                        "LOOM_SHM_ARENA_PIECE=64K on rank 0"));
}

TEST_CASE("arena pieces: LOOM_SHM_ARENA_PIECE's sizes", "[arena_pieces][config]") {
  using select::arena_piece_from;
  auto piece_of = [](const std::string& text, int n) {
    auto r = arena_piece_from(text, n);
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
    auto r = arena_piece_from(bad, 4);
    REQUIRE(!r.is_ok());
    CHECK_THAT(r.status().message(), Catch::Contains("LOOM_SHM_ARENA_PIECE"));
  }
}
