// Small collectives through the shared-memory arena (LOOM_SHM_ONESHOT_MAX, core/arena_task.*):
// allreduce is the rank-order fold on every rank (the same bits as LOOM_DETERMINISTIC's message
// path), in place and out of place, at the capacity's edge and past it, with pre-multiplied sums
// and averages; reduce, reduce_scatter, allgather, broadcast (every root), alltoall and barrier
// exact (gather and scatter, which stay on messages, beside them);
// calls mixed with calls that take messages and many in flight at once; the call ledger names the
// algorithm; a forced algorithm bypasses the arena; mismatched calls are named; named segments
// leave nothing in /dev/shm.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "arena_helpers.hpp"
#include "comm_harness.hpp"
#include "kernels/host/reduce.hpp"
#include "selector/plan_policy.hpp"

using namespace loom;
using loom::test::last_algorithm;
using loom::test::random_floats;
using loom::test::rank_order_sum;
using loom::test::run_ranks;
using loom::test::same_bits;

namespace {

// Records `what` on rank `comm.rank()` of `n` as wrong when its result is not `ok`, or when it
// went through the arena and should not have, or the other way round (`arena`).
void check_call(loom::test::Findings& f, const Communicator& comm, int n, bool ok, bool arena,
                const std::string& what) {
  const std::string algo = last_algorithm(comm);
  if (!ok) f.add(fmt::format("rank {} of {}: {} ({})", comm.rank(), n, what, algo));
  if (arena != (algo == "oneshot"))
    f.add(fmt::format("rank {} of {}: {}: arena used wrongly ({})", comm.rank(), n, what, algo));
}

}  // namespace

TEST_CASE("arena: small allreduces are the rank-order fold on every rank", "[arena][shm]") {
  for (int n : {2, 3, 5}) {
    loom::test::Findings f;
    run_ranks(
        n,
        [&](Communicator& comm) {
          const int r = comm.rank();
          // 1 KiB holds 256 floats: 1 .. 256 take the arena, 257 takes messages.
          for (std::size_t count : {1, 7, 255, 256, 257}) {
            const std::vector<float> want = rank_order_sum(n, count, static_cast<unsigned>(count));
            auto in = random_floats(r, count, static_cast<unsigned>(count));
            std::vector<float> out(count, -1.0f);
            comm.allreduce(std::span<const float>(in), std::span<float>(out), RedOp::Sum).wait();
            const std::string algo = last_algorithm(comm);
            const std::string what =
                fmt::format("rank {} of {}, {} floats ({})", r, n, count, algo);
            if ((count <= 256) != (algo == "oneshot")) f.add(what + ": arena used wrongly");
            if (count <= 256 && !same_bits(out, want)) f.add(what + ": not the rank-order sum");
            comm.allreduce(std::span<float>(in), RedOp::Sum).wait();  // in place
            if (count <= 256 && !same_bits(in, want))
              f.add(what + " in place: not the rank-order sum");
          }
        },
        {{"LOOM_SHM_ONESHOT_MAX", "1K"}});
    INFO(f.first);
    CHECK(f.wrong == 0);
  }
}

TEST_CASE("arena: the same bits as deterministic mode's messages", "[arena][shm][deterministic]") {
  const int n = 4;
  const std::size_t count = 300;
  std::vector<std::vector<float>> got(2, std::vector<float>(static_cast<std::size_t>(n) * count));
  for (int arena = 0; arena < 2; ++arena)
    run_ranks(
        n,
        [&](Communicator& comm) {
          auto in = random_floats(comm.rank(), count, 5);
          std::vector<float> out(count);
          comm.allreduce(std::span<const float>(in), std::span<float>(out), RedOp::Sum).wait();
          std::memcpy(got[static_cast<std::size_t>(arena)].data() +
                          static_cast<std::size_t>(comm.rank()) * count,
                      out.data(), count * sizeof(float));
        },
        {{"LOOM_DETERMINISTIC", "1"}, {"LOOM_SHM_ONESHOT_MAX", arena ? "4K" : "0"}});
  CHECK(std::memcmp(got[0].data(), got[1].data(), got[0].size() * sizeof(float)) == 0);
}

TEST_CASE("arena: every op and dtype, averages and pre-multiplied sums", "[arena][shm][redops]") {
  const int n = 3;
  loom::test::Findings f;
  run_ranks(n, [&](Communicator& comm) {
    const int r = comm.rank();
    // Integers small enough that every op is exact.
    for (RedOp op : {RedOp::Sum, RedOp::Prod, RedOp::Min, RedOp::Max, RedOp::BitAnd, RedOp::BitOr,
                     RedOp::BitXor}) {
      std::vector<std::int32_t> in(9), out(9);
      for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<std::int32_t>(i + 3 * r + 1);
      comm.allreduce(std::span<const std::int32_t>(in), std::span<std::int32_t>(out), op).wait();
      for (std::size_t i = 0; i < in.size(); ++i) {
        std::int32_t want = static_cast<std::int32_t>(i + 1);
        for (int q = 1; q < n; ++q) {
          const auto x = static_cast<std::int32_t>(i + 3 * q + 1);
          switch (op) {
            case RedOp::Sum: want += x; break;
            case RedOp::Prod: want *= x; break;
            case RedOp::Min: want = std::min(want, x); break;
            case RedOp::Max: want = std::max(want, x); break;
            case RedOp::BitAnd: want &= x; break;
            case RedOp::BitOr: want |= x; break;
            default: want ^= x; break;
          }
        }
        if (out[i] != want) f.add(fmt::format("rank {}: {} element {}", r, to_string(op), i));
      }
    }
    std::vector<double> x(5, 2.0 * (r + 1)), avg(5);
    comm.allreduce(std::span<const double>(x), std::span<double>(avg), RedOp::Avg).wait();
    if (avg[4] != 4.0) f.add(fmt::format("rank {}: avg {}", r, avg[4]));  // (2 + 4 + 6) / 3
    CollOptions scaled;
    scaled.scalar = 0.5 * (r + 1);
    std::vector<float> y(6, 4.0f);
    comm.allreduce(std::span<float>(y), RedOp::PreMulSum, scaled).wait();  // 2 + 4 + 6
    if (y[5] != 12.0f) f.add(fmt::format("rank {}: premulsum {}", r, y[5]));
    if (last_algorithm(comm) != "oneshot") f.add("not through the arena: " + last_algorithm(comm));
  });
  INFO(f.first);
  CHECK(f.wrong == 0);
}

TEST_CASE("arena: reduce, reduce_scatter, allgather, broadcast and barrier", "[arena][shm]") {
  for (int n : {2, 3, 4}) {
    loom::test::Findings f;
    run_ranks(
        n,
        [&](Communicator& comm) {
          const int r = comm.rank();
          const auto un = static_cast<std::size_t>(n);
          auto check = [&](bool ok, const std::string& what) {
            check_call(f, comm, n, ok, true, what);
          };
          for (std::size_t count : {1, 5, 64}) {
            for (int root = 0; root < n; ++root) {
              // reduce (sum of r + i + 1), out of place and in place
              std::vector<std::int32_t> in(count), out(count, -1);
              for (std::size_t i = 0; i < count; ++i) in[i] = static_cast<std::int32_t>(r + i + 1);
              comm.reduce(in.data(), r == root ? out.data() : nullptr, count, DataType::Int32,
                          RedOp::Sum, root)
                  .wait();
              const auto sum_at = [&](std::size_t i) {
                return static_cast<std::int32_t>(n * (n - 1) / 2 + n * static_cast<int>(i + 1));
              };
              check(r != root || out[count - 1] == sum_at(count - 1), "reduce");
              check(r == root || out[0] == -1, "reduce wrote a non-root's buffer");
              // broadcast, out of place at the root, in place elsewhere
              std::vector<double> b(count, r == root ? 0.5 + root : -1.0), got(count, -2.0);
              comm.broadcast(b.data(), r == root ? got.data() : b.data(), count, DataType::Float64,
                             root)
                  .wait();
              const std::vector<double>& res = r == root ? got : b;
              check(res[count - 1] == 0.5 + root && res[0] == 0.5 + root, "broadcast");
            }
            // reduce_scatter: block q of rank r holds r * 1000 + q
            std::vector<std::int64_t> rs(un * count), blk(count);
            for (std::size_t q = 0; q < un; ++q)
              for (std::size_t i = 0; i < count; ++i)
                rs[q * count + i] = r * 1000 + static_cast<std::int64_t>(q * 10 + i);
            comm.reduce_scatter(rs.data(), blk.data(), count, DataType::Int64, RedOp::Max).wait();
            check(blk[count - 1] ==
                      (n - 1) * 1000 +
                          static_cast<std::int64_t>(static_cast<std::size_t>(r) * 10 + count - 1),
                  "reduce_scatter");
            // in place: the result lands in this rank's own block
            comm.reduce_scatter(rs.data(), rs.data() + static_cast<std::size_t>(r) * count, count,
                                DataType::Int64, RedOp::Min)
                .wait();
            check(rs[static_cast<std::size_t>(r) * count] == static_cast<std::int64_t>(r) * 10,
                  "reduce_scatter in place");
            // allgather, out of place and in place
            std::vector<std::uint8_t> mine(count, static_cast<std::uint8_t>(r + 7)),
                all(un * count);
            comm.allgather(mine.data(), all.data(), count, DataType::Uint8).wait();
            bool ok = true;
            for (std::size_t q = 0; q < un; ++q)
              ok = ok && all[q * count] == q + 7 && all[q * count + count - 1] == q + 7;
            check(ok, "allgather");
            std::vector<std::uint8_t> inplace(un * count, 0);
            std::fill_n(
                inplace.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(r) * count),
                count, static_cast<std::uint8_t>(r + 9));
            comm.allgather(inplace.data() + static_cast<std::size_t>(r) * count, inplace.data(),
                           count, DataType::Uint8)
                .wait();
            check(inplace[un * count - 1] == n - 1 + 9 && inplace[0] == 9, "allgather in place");
            comm.barrier().wait();
            check(true, "barrier");
          }
        },
        {{"LOOM_SHM_ONESHOT_MAX", "4K"}});
    INFO(f.first);
    CHECK(f.wrong == 0);
  }
}

TEST_CASE("arena: alltoall through it; gather and scatter beside it, every root, in place too",
          "[arena][shm]") {
  for (int n : {2, 3, 5}) {
    loom::test::Findings f;
    run_ranks(
        n,
        [&](Communicator& comm) {
          const int r = comm.rank();
          const auto un = static_cast<std::size_t>(n);
          // 4K of input per rank: alltoall and scatter's root send n x count elements.
          const std::size_t cap = 4096 / sizeof(std::int32_t) / un;
          auto check = [&](bool ok, bool arena, const std::string& what) {
            check_call(f, comm, n, ok, arena, what);
          };
          // Element i of the block from rank s to rank d.
          auto val = [](int s, int d, std::size_t i) {
            return static_cast<std::int32_t>(s * 100000 + d * 1000 + static_cast<int>(i));
          };
          for (std::size_t count : {std::size_t{1}, std::size_t{5}, cap, cap + 1}) {
            const bool arena = count <= cap;
            const std::string c = fmt::format(" of {}", count);
            std::vector<std::int32_t> send(un * count), recv(un * count, -1);
            for (std::size_t d = 0; d < un; ++d)
              for (std::size_t i = 0; i < count; ++i)
                send[d * count + i] = val(r, static_cast<int>(d), i);
            comm.alltoall(send.data(), recv.data(), count, DataType::Int32).wait();
            bool ok = true;
            for (std::size_t s2 = 0; s2 < un; ++s2)
              for (std::size_t i = 0; i < count; ++i)
                ok = ok && recv[s2 * count + i] == val(static_cast<int>(s2), r, i);
            check(ok, arena, "alltoall" + c);
            comm.alltoall(send.data(), send.data(), count, DataType::Int32).wait();  // in place
            check(send == recv, arena, "alltoall in place" + c);
            for (int root = 0; root < n; ++root) {
              // gather: the root gets every rank's block; the others' buffers stay untouched
              std::vector<std::int32_t> mine(count), all(un * count, -1);
              for (std::size_t i = 0; i < count; ++i) mine[i] = val(r, root, i);
              comm.gather(mine.data(), r == root ? all.data() : nullptr, count, DataType::Int32,
                          root)
                  .wait();
              ok = true;
              for (std::size_t s2 = 0; s2 < un && r == root; ++s2)
                for (std::size_t i = 0; i < count; ++i)
                  ok = ok && all[s2 * count + i] == val(static_cast<int>(s2), root, i);
              check(ok, false, fmt::format("gather to {}{}", root, c));  // messages: one step
              // in place at the root: its own block already sits in the receive buffer
              std::vector<std::int32_t> inplace(un * count, -1);
              if (r == root)
                std::copy(mine.begin(), mine.end(),
                          inplace.begin() +
                              static_cast<std::ptrdiff_t>(static_cast<std::size_t>(r) * count));
              comm.gather(r == root ? inplace.data() + static_cast<std::size_t>(r) * count
                                    : mine.data(),
                          r == root ? inplace.data() : nullptr, count, DataType::Int32, root)
                  .wait();
              check(r != root || inplace == all, false,
                    fmt::format("gather in place to {}{}", root, c));
              // scatter: rank d gets the root's block d
              std::vector<std::int32_t> blocks(un * count), got(count, -1);
              for (std::size_t d = 0; d < un; ++d)
                for (std::size_t i = 0; i < count; ++i)
                  blocks[d * count + i] = val(root, static_cast<int>(d), i);
              comm.scatter(r == root ? blocks.data() : nullptr, got.data(), count, DataType::Int32,
                           root)
                  .wait();
              ok = true;
              for (std::size_t i = 0; i < count; ++i) ok = ok && got[i] == val(root, r, i);
              check(ok, false, fmt::format("scatter from {}{}", root, c));
              // in place at the root: its block stays where it is
              comm.scatter(
                      r == root ? blocks.data() : nullptr,
                      r == root ? blocks.data() + static_cast<std::size_t>(r) * count : got.data(),
                      count, DataType::Int32, root)
                  .wait();
              ok = true;
              const std::int32_t* mine_now =
                  r == root ? blocks.data() + static_cast<std::size_t>(r) * count : got.data();
              for (std::size_t i = 0; i < count; ++i) ok = ok && mine_now[i] == val(root, r, i);
              check(ok, false, fmt::format("scatter in place from {}{}", root, c));
            }
          }
        },
        {{"LOOM_SHM_ONESHOT_MAX", "4K"}});
    INFO(f.first);
    CHECK(f.wrong == 0);
  }
}

// A broadcast's root completes without reading any slot: the others' calls are compared when
// the next call starts, or when the communicator goes idle.
TEST_CASE("arena: a broadcast with another root is a mismatch on every rank",
          "[arena][shm][mismatch]") {
  for (int n : {2, 3}) {  // at 2 ranks both are roots: neither reads a slot
    std::vector<std::string> errors(static_cast<std::size_t>(n));
    run_ranks(n, [&](Communicator& comm) {
      std::vector<float> v(4, 1.0f);
      for (int i = 0; i < 3; ++i) comm.allreduce(std::span<float>(v), RedOp::Sum).wait();
      const int root = comm.rank() == 1 ? 1 : 0;
      auto e = loom::test::error_of([&] { comm.broadcast(std::span<float>(v), root).wait(); });
      for (int i = 0; i < 500 && !e; ++i) {  // completed: the idle check finds it
        e = comm.async_error();
        if (!e) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      if (e && e->code() == ErrorCode::Mismatch)
        errors[static_cast<std::size_t>(comm.rank())] = e->what();
    });
    INFO(n << " ranks");
    for (const auto& e : errors)
      CHECK_THAT(e, Catch::Contains("broadcast #3 (4 x float, root 0)") &&
                        Catch::Contains("broadcast #3 (4 x float, root 1)"));
  }
}

// A call that finishes where it is made tells the call ledger of itself once, at its end; one
// that waits longer (its peer is late) or queues behind another is recorded as it is queued. The
// flight record and status() show every call either way, in order, each once.
TEST_CASE("arena: calls finished where they were made and calls that waited are each recorded",
          "[arena][shm][flight]") {
  constexpr int kCalls = 120;
  loom::test::Findings f;
  run_ranks(2, [&](Communicator& comm) {
    const int r = comm.rank();
    for (int i = 0; i < kCalls; i += 3) {
      if (r == 1 && i % 30 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(3));
      std::vector<std::int32_t> a(5, i + r), b(5, 10 * i + r), c(5, r == 0 ? i : -1);
      Work wa = comm.allreduce(std::span<std::int32_t>(a), RedOp::Sum);
      Work wb = comm.allreduce(std::span<std::int32_t>(b), RedOp::Max);  // behind a in flight
      wa.wait();
      wb.wait();
      comm.broadcast(std::span<std::int32_t>(c), 0).wait();
      if (a[4] != 2 * i + 1 || b[4] != 10 * i + 1 || c[4] != i)
        f.add(fmt::format("rank {} call {}: {} {} {}", r, i, a[4], b[4], c[4]));
    }
    const auto doc = nlohmann::json::parse(comm.flight_record());
    const auto& calls = doc.at("calls");
    if (calls.size() != kCalls) f.add(fmt::format("rank {}: {} calls", r, calls.size()));
    for (std::size_t i = 0; i < calls.size(); ++i) {
      const auto& c = calls[i];
      const auto sub = c.at("submitted_ns").get<std::int64_t>();
      const auto start = c.at("started_ns").get<std::int64_t>();
      const auto end = c.at("completed_ns").get<std::int64_t>();
      if (c.at("seq") != i || c.at("algorithm") != "oneshot" || c.at("state") != "completed" ||
          !(sub > 0 && sub <= start && start <= end))
        f.add(fmt::format("rank {}: call {}: {}", r, i, c.dump()));
    }
    const std::string status = comm.status();
    if (status.find(fmt::format("last completed #{}", kCalls - 1)) == std::string::npos ||
        status.find("in progress") != std::string::npos)
      f.add(fmt::format("rank {}: {}", r, status));
  });
  INFO(f.first);
  CHECK(f.wrong == 0);
}

TEST_CASE("arena: a broadcast's root runs ahead by one call", "[arena][shm]") {
  // The root completes at once; it may publish its next call only when every rank has published
  // this one, so its next slot never overwrites one still being read.
  loom::test::Findings f;
  run_ranks(4, [&](Communicator& comm) {
    const int r = comm.rank();
    for (int i = 0; i < 300; ++i) {
      std::vector<std::int32_t> v(16, r == 0 ? i : -1);
      comm.broadcast(std::span<std::int32_t>(v), 0).wait();
      if (v[15] != i) f.add(fmt::format("rank {} call {}: {}", r, i, v[15]));
      if (r == 3 && i % 50 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  INFO(f.first);
  CHECK(f.wrong == 0);
}

TEST_CASE("arena: interleaved with message calls, many in flight", "[arena][shm]") {
  const int n = 4;
  loom::test::Findings f;
  run_ranks(n, [&](Communicator& comm) {
    const int r = comm.rank();
    for (int round = 0; round < 50; ++round) {
      std::vector<std::vector<std::int64_t>> small(6, std::vector<std::int64_t>(3));
      std::vector<Work> works;
      for (std::size_t k = 0; k < small.size(); ++k) {  // six arena calls in flight
        for (auto& v : small[k]) v = round * 100 + static_cast<int>(k) * 10 + r;
        works.push_back(comm.allreduce(std::span<std::int64_t>(small[k]), RedOp::Sum));
      }
      std::vector<std::int64_t> big(20000, r + 1);  // 160 KB: messages
      works.push_back(comm.allreduce(std::span<std::int64_t>(big), RedOp::Max));
      std::vector<std::int32_t> b(4, r == round % n ? round : -1);  // its root may finish first
      works.push_back(comm.broadcast(std::span<std::int32_t>(b), round % n));
      for (auto& w : works) w.wait();
      for (std::size_t k = 0; k < small.size(); ++k) {
        const std::int64_t want = n * (round * 100 + static_cast<int>(k) * 10) + n * (n - 1) / 2;
        if (small[k][2] != want) f.add(fmt::format("rank {} round {} call {}", r, round, k));
      }
      if (big[19999] != n || b[3] != round) f.add(fmt::format("rank {} round {}", r, round));
    }
  });
  INFO(f.first);
  CHECK(f.wrong == 0);
}

TEST_CASE("arena: a forced algorithm or LOOM_SHM_ONESHOT_MAX=0 takes messages", "[arena][shm]") {
  run_ranks(2, [&](Communicator& comm) {
    std::vector<float> v(4, 1.0f);
    CollOptions ring;
    ring.algorithm = Algorithm::Ring;
    comm.allreduce(std::span<float>(v), RedOp::Sum, ring).wait();
    CHECK(last_algorithm(comm) == "ring");
    comm.allreduce(std::span<float>(v), RedOp::Sum).wait();
    CHECK(last_algorithm(comm) == "oneshot");
    CHECK(v[0] == 4.0f);
  });
  run_ranks(2,
            [&](Communicator& comm) {
              std::vector<float> v(4, 1.0f);
              comm.allreduce(std::span<float>(v), RedOp::Sum).wait();
              CHECK(last_algorithm(comm) != "oneshot");
            },
            {{"LOOM_SHM_ONESHOT_MAX", "0"}});
  run_ranks(2,
            [&](Communicator& comm) {
              std::vector<float> v(4, 1.0f);
              comm.allreduce(std::span<float>(v), RedOp::Sum).wait();
              CHECK(last_algorithm(comm) == "rd");
            },
            {{"LOOM_ALGO", "rd"}});
}

TEST_CASE("arena: a mismatched call names both ranks and both calls", "[arena][shm][mismatch]") {
  std::vector<std::string> errors(3);
  run_ranks(3, [&](Communicator& comm) {
    const std::size_t count = comm.rank() == 2 ? 6 : 5;
    std::vector<float> v(count, 1.0f);
    auto e = loom::test::error_of([&] { comm.allreduce(std::span<float>(v), RedOp::Sum).wait(); });
    if (e) errors[static_cast<std::size_t>(comm.rank())] = e->what();
  });
  CHECK_THAT(errors[0], Catch::Contains("rank 0 expected allreduce #0 (5 x float, sum)") &&
                            Catch::Contains("rank 2 sent allreduce #0 (6 x float, sum)"));
  CHECK_THAT(errors[2], Catch::Contains("rank 2 expected allreduce #0 (6 x float, sum)") &&
                            Catch::Contains("from rank 0"));
}

TEST_CASE("arena: broadcast against reduce, then a barrier: Mismatch at once",
          "[arena][shm][mismatch]") {
  std::vector<std::string> errors(3);
  run_ranks(3, [&](Communicator& comm) {
    std::vector<std::int64_t> buf(64, comm.rank());
    auto e = loom::test::error_of([&] {
      if (comm.rank() == 0)
        comm.broadcast(buf.data(), buf.data(), buf.size(), DataType::Int64, 0);
      else
        comm.reduce(buf.data(), nullptr, buf.size(), DataType::Int64, RedOp::Max, 0);
      comm.barrier().wait();
    });
    if (e && e->code() == ErrorCode::Mismatch)
      errors[static_cast<std::size_t>(comm.rank())] = e->what();
  });
  for (const auto& e : errors)
    CHECK_THAT(e, Catch::Contains("broadcast #0 (64 x int64, root 0)") &&
                      Catch::Contains("reduce #0 (64 x int64, max, root 0)"));
}

TEST_CASE("arena: named segments leave nothing in /dev/shm", "[arena][shm][orphans]") {
  auto ours = [] {
    int k = 0;
    for (const auto& e : std::filesystem::directory_iterator("/dev/shm"))
      if (e.path().filename().string().find("-arena-") != std::string::npos) ++k;
    return k;
  };
  const int before = ours();
  run_ranks(3,
            [&](Communicator& comm) {
              std::vector<std::int32_t> v(3, comm.rank());
              comm.allreduce(std::span<std::int32_t>(v), RedOp::Sum).wait();
              CHECK(v[1] == 3);
              CHECK(last_algorithm(comm) == "oneshot");
            },
            {{"LOOM_SHM_SEGMENTS", "named"}});
  CHECK(ours() == before);
}

TEST_CASE("arena: ranks that set LOOM_SHM_ONESHOT_MAX differently are told",
          "[arena][shm][config]") {
  auto store = std::make_shared<bootstrap::InMemoryStore>();
  std::vector<std::string> errors(2);
  loom::test::on_rank_threads(2, [&](int r) {
    auto e = loom::test::error_of([&] {
      Communicator c = loom::test::make_comm(
          store, r, 2, 0x7a11,
          {{"LOOM_TIMEOUT", "20s"}, {"LOOM_SHM_ONESHOT_MAX", r == 0 ? "4K" : "8K"}});
    });
    if (e) errors[static_cast<std::size_t>(r)] = e->what();
  });
  CHECK_THAT(errors[1],
             Catch::Contains("LOOM_SHM_ONESHOT_MAX=8K here but LOOM_SHM_ONESHOT_MAX=4K on rank 0"));
}

TEST_CASE("arena: LOOM_SHM_ONESHOT_MAX's sizes", "[arena][config]") {
  using select::oneshot_max_from;
  auto max_of = [](const std::string& text, int n) {
    auto r = oneshot_max_from(text, n);
    return r.is_ok() ? *r : ~std::size_t{0};
  };
  CHECK(max_of("auto", 2) == 32 * 1024);
  CHECK(max_of("auto", 8) == 32 * 1024);
  CHECK(max_of("auto", 16) == 16 * 1024);
  CHECK(max_of("auto", 64) == 4 * 1024);
  CHECK(max_of("auto", 3) == 32 * 1024);
  CHECK(max_of("auto", 100) == 2560);  // 2621 rounded down to 64 bytes
  CHECK(max_of("0", 4) == 0);
  CHECK(max_of("1M", 4) == 1024 * 1024);
  CHECK(max_of("100", 4) == 100);  // the arena rounds its slots up to 64 bytes
  for (const char* bad : {"", "banana", "2M", "-1"}) {
    INFO(bad);
    auto r = oneshot_max_from(bad, 4);
    REQUIRE(!r.is_ok());
    CHECK_THAT(r.status().message(), Catch::Contains("LOOM_SHM_ONESHOT_MAX"));
  }
}
