// Calls that ranks issue differently, threads as ranks: a group whose allreduces are split
// differently (the fused totals agree), sends and receives issued in another order relative to
// collectives, a collective refused at the call on one rank; each ends in Mismatch on every rank
// involved, naming both calls, within seconds (never in success with mixed data, never at
// LOOM_TIMEOUT). A peer that leaves at once after finding a mismatch tells the others that
// mismatch, not its closed connection.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "comm_harness.hpp"
#include "end_together.hpp"
#include "mismatch_helpers.hpp"

using namespace loom;
using Catch::Matchers::Contains;
using loom::test::expect_mismatch;
using loom::test::failure_after;
using loom::test::MismatchClock;

namespace {

constexpr auto kWithin = std::chrono::milliseconds(4000);  // about a second, on shared CPUs

// The routes a call can take: shm with the arena (one step, and in pieces from 3 ranks), shm
// messages only, tcp.
std::vector<std::map<std::string, std::string>> routes() {
  static const std::vector<std::map<std::string, std::string>> r = {
      {{"LOOM_TRANSPORTS", "shm"}, {"LOOM_TIMEOUT", "30s"}},
      {{"LOOM_TRANSPORTS", "shm"},
       {"LOOM_TIMEOUT", "30s"},
       {"LOOM_SHM_ONESHOT_MAX", "0"},
       {"LOOM_SHM_ARENA_PIECE", "0"}},
      {{"LOOM_TRANSPORTS", "tcp"}, {"LOOM_TIMEOUT", "30s"}},
  };
  return r;
}

std::string name(const std::map<std::string, std::string>& s) {
  return s.at("LOOM_TRANSPORTS") + (s.count("LOOM_SHM_ONESHOT_MAX") ? " (messages)" : "");
}

// A group of allreduces of `counts` (in call order) over one buffer, waited for.
void grouped_allreduces(Communicator& comm, std::vector<float>& buf,
                        const std::vector<std::size_t>& counts) {
  std::vector<Work> works;
  std::size_t at = 0;
  comm.group_start();
  for (std::size_t c : counts) {
    works.push_back(
        comm.allreduce(buf.data() + at, buf.data() + at, c, DataType::Float32, RedOp::Sum));
    at += c;
  }
  comm.group_end();
  for (Work& w : works) w.wait();
}

}  // namespace

TEST_CASE("call order: a group split differently on two ranks is a Mismatch on both",
          "[groups][mismatch]") {
  // {10, 20} against {20, 10}: equal totals, other splits; {n, n} against {2n}: a fused call
  // against a single one of the same size. Small (the arena's one step), larger (its pieces or
  // messages).
  for (const auto& settings : routes())
    for (std::size_t unit : {std::size_t{10}, std::size_t{30000}})
      for (int n : {2, 3}) {
        DYNAMIC_SECTION(name(settings) << ", " << n << " ranks, unit " << unit) {
          for (int shape = 0; shape < 2; ++shape) {
            loom::test::run_together(
                n,
                [&](Communicator& comm) {
                  const bool odd = comm.rank() == 1;
                  std::vector<std::size_t> counts =
                      shape == 0 ? (odd ? std::vector<std::size_t>{2 * unit, unit}
                                        : std::vector<std::size_t>{unit, 2 * unit})
                                 : (odd ? std::vector<std::size_t>{2 * unit}
                                        : std::vector<std::size_t>{unit, unit});
                  std::vector<float> buf(3 * unit, float(comm.rank() + 1));
                  const auto t0 = MismatchClock::now();
                  auto e = failure_after(
                      comm, [&] { grouped_allreduces(comm, buf, counts); }, kWithin);
                  // Rank 1 is named to every rank, with the rank that found it.
                  expect_mismatch(e, 1, comm.rank(), t0, comm.rank(), kWithin);
                  if (e) CHECK_THAT(e->what(), Contains("calls fused") && Contains("split"));
                },
                settings);
          }
        }
      }
}

// Fused calls through the arena's pieces are read and written in their own buffers: members
// in and out of place, pieces that start and end inside members (4 KiB pieces), sum and avg.
TEST_CASE("call order: groups split alike are fused and exact", "[groups]") {
  auto pieces = routes();
  pieces.push_back(
      {{"LOOM_TRANSPORTS", "shm"}, {"LOOM_TIMEOUT", "30s"}, {"LOOM_SHM_ARENA_PIECE", "4K"}});
  for (const auto& settings : pieces)
    for (int n : {3, 4})
      for (RedOp op : {RedOp::Sum, RedOp::Avg}) {
        DYNAMIC_SECTION(name(settings) << (settings.count("LOOM_SHM_ARENA_PIECE") ? " 4K" : "")
                                       << ", " << n << " ranks, " << to_string(op)) {
          loom::test::run_ranks(
              n,
              [&](Communicator& comm) {
                const std::vector<std::size_t> counts = {7, 30000, 1, 5000, 333, 4096};
                std::vector<std::vector<float>> in(counts.size()), out(counts.size());
                std::vector<Work> works;
                comm.group_start();
                for (std::size_t m = 0; m < counts.size(); ++m) {
                  in[m].resize(counts[m]);
                  for (std::size_t i = 0; i < counts[m]; ++i)
                    in[m][i] = float(comm.rank() + 1) * float((i + m) % 13);
                  const bool in_place = m % 2 == 1;
                  out[m].assign(counts[m], -1.0f);
                  float* dst = in_place ? in[m].data() : out[m].data();
                  works.push_back(
                      comm.allreduce(in[m].data(), dst, counts[m], DataType::Float32, op));
                }
                comm.group_end();
                for (Work& w : works) w.wait();
                const float ranks_sum = float(n * (n + 1) / 2);
                std::size_t exact = 0;
                for (std::size_t m = 0; m < counts.size(); ++m, ++exact) {
                  const std::vector<float>& got = m % 2 == 1 ? in[m] : out[m];
                  for (std::size_t i = 0; i < counts[m]; ++i) {
                    float want = ranks_sum * float((i + m) % 13);
                    if (op == RedOp::Avg) want /= float(n);
                    if (got[i] != want) {
                      FAIL_CHECK("member " << m << " element " << i << ": " << got[i] << " want "
                                           << want);
                      return;
                    }
                  }
                }
                CHECK(exact == counts.size());
              },
              settings);
        }
      }
}

// Rank 0 sends, then joins a collective; rank 1 joins the collective first and receives after:
// the pair issued them in different orders. Small sends complete eagerly (rank 1's receive finds
// a message its sender issued before the collective); large ones wait for a receive that rank 1
// has not issued while rank 1 waits in the collective for rank 0 (found while it waits).
TEST_CASE("call order: a send and a collective issued in different orders are a Mismatch",
          "[p2p][mismatch]") {
  for (const auto& settings : routes())
    for (std::size_t count : {std::size_t{1024}, std::size_t{4} << 20}) {
      DYNAMIC_SECTION(name(settings) << ", " << count << " floats") {
        loom::test::run_together(
            2,
            [&](Communicator& comm) {
              std::vector<float> b(count, float(comm.rank() + 1)), s(1024, 1.0f);
              const auto t0 = MismatchClock::now();
              auto e = failure_after(
                  comm,
                  [&] {
                    if (comm.rank() == 0) {
                      comm.send(b.data(), count, DataType::Float32, 1).wait();
                      comm.allreduce(s.data(), s.data(), s.size(), DataType::Float32, RedOp::Sum)
                          .wait();
                    } else {
                      comm.allreduce(s.data(), s.data(), s.size(), DataType::Float32, RedOp::Sum)
                          .wait();
                      comm.recv(b.data(), count, DataType::Float32, 0).wait();
                    }
                  },
                  kWithin);
              expect_mismatch(e, 0, 1, t0, comm.rank(), kWithin);
              if (e) CHECK_THAT(e->what(), Contains("same order"));
              // Rank 1 never takes the message as its data.
              if (comm.rank() == 1) CHECK(b[0] == 2.0f);
            },
            settings);
      }
    }
}

// The same order violation reached through a group: the rank whose group threw before its
// receive goes on to the collective.
TEST_CASE("call order: a group that threw before its receive is a Mismatch, not a hang",
          "[groups][p2p][mismatch]") {
  for (std::size_t count : {std::size_t{1024}, std::size_t{4} << 20}) {
    DYNAMIC_SECTION(count << " floats") {
      loom::test::run_together(2,
                               [&](Communicator& comm) {
                                 std::vector<float> b(count, 1.0f), s(64, 1.0f);
                                 const auto t0 = MismatchClock::now();
                                 auto e = failure_after(
                                     comm,
                                     [&] {
                                       try {
                                         Group g(comm);
                                         if (comm.rank() == 1)
                                           throw std::runtime_error("before the receive");
                                         comm.send(b.data(), count, DataType::Float32, 1);
                                         g.end();
                                       } catch (const std::runtime_error&) {
                                       }
                                       comm.allreduce(s.data(), s.data(), s.size(),
                                                      DataType::Float32, RedOp::Sum)
                                           .wait();
                                       comm.barrier().wait();
                                     },
                                     kWithin);
                                 expect_mismatch(e, 0, 1, t0, comm.rank(), kWithin);
                               },
                               {{"LOOM_TRANSPORTS", "shm"}, {"LOOM_TIMEOUT", "30s"}});
    }
  }
}

// Sends and receives in a group run after the group's collectives, in any order inside it: not a
// mismatch.
TEST_CASE("call order: inside a group, sends and collectives may come in any order", "[groups]") {
  loom::test::run_ranks(2,
                        [&](Communicator& comm) {
                          std::vector<float> b(4096, float(comm.rank() + 1)), s(64, 1.0f);
                          {
                            Group g(comm);
                            if (comm.rank() == 0)
                              comm.send(b.data(), b.size(), DataType::Float32, 1);
                            comm.allreduce(s.data(), s.data(), s.size(), DataType::Float32,
                                           RedOp::Sum);
                            if (comm.rank() == 1)
                              comm.recv(b.data(), b.size(), DataType::Float32, 0);
                            g.end();
                          }
                          comm.barrier().wait();
                          CHECK(s[0] == 2.0f);
                          CHECK(b[4095] == 1.0f);
                          CHECK_FALSE(comm.async_error().has_value());
                        },
                        {{"LOOM_TRANSPORTS", "shm"}, {"LOOM_TIMEOUT", "30s"}});
}

// A rank that finds a mismatch and destroys its communicator at once: the other learns the
// mismatch (its record), not "rank 1 closed its connection".
TEST_CASE("call order: a peer that leaves after a mismatch tells the others why",
          "[errors][mismatch]") {
  for (const std::string transports : {"shm", "tcp"}) {
    DYNAMIC_SECTION(transports) {
      loom::test::run_ranks(3,
                            [&](Communicator& comm) {
                              // Rank 0 sends a short block to rank 1; rank 2 is not involved in the
                              // mismatch.
                              const std::size_t k = 1 << 20;
                              std::vector<std::size_t> sc(3, k), rc(3, k);
                              if (comm.rank() == 0) sc[1] = k / 2;
                              std::vector<float> in(3 * k, 1.0f), out(3 * k);
                              const auto t0 = MismatchClock::now();
                              auto e = failure_after(
                                  comm,
                                  [&] {
                                    comm.alltoallv(in.data(), std::span<const std::size_t>(sc),
                                                   out.data(), std::span<const std::size_t>(rc),
                                                   DataType::Float32)
                                        .wait();
                                  },
                                  kWithin);
                              expect_mismatch(e, 0, 1, t0, comm.rank(), kWithin);
                            },
                            {{"LOOM_TRANSPORTS", transports}, {"LOOM_TIMEOUT", "30s"}});
    }
  }
}

// A rank whose collective is refused at the call (a bad argument) keeps its number: the others,
// waiting in theirs, are told that rank refused it.
TEST_CASE("call order: a collective refused on one rank is named to the others",
          "[errors][mismatch]") {
  loom::test::run_together(3,
                           [&](Communicator& comm) {
                             std::vector<float> b(1 << 20, 1.0f);
                             const auto t0 = MismatchClock::now();
                             auto e = failure_after(
                                 comm,
                                 [&] {
                                   float* p = comm.rank() == 1 ? nullptr : b.data();
                                   comm.broadcast(p, p, b.size(), DataType::Float32, 0).wait();
                                 },
                                 kWithin);
                             if (comm.rank() == 1) {
                               CHECK((e && e->code() == ErrorCode::InvalidArgument));
                               return;
                             }
                             INFO("rank " << comm.rank() << ": " << (e ? e->what() : "no error"));
                             CHECK((e && e->code() == ErrorCode::Mismatch));
                             if (e)
                               CHECK_THAT(e->what(),
                                          Contains("rank 1") && Contains("refused at the call"));
                             CHECK(loom::test::seconds_since(t0) < 4.0);
                           },
                           {{"LOOM_TRANSPORTS", "shm"},
                            {"LOOM_TIMEOUT", "30s"},
                            {"LOOM_MISMATCH_CHECK_AFTER", "300ms"}});
}
