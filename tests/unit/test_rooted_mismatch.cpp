// Mismatched rooted collectives (docs/reliability.md): calls whose messages are all sent eagerly
// and never received by a wrong receive (broadcast on one rank, reduce on the others; broadcasts
// with different roots), and calls that wait for each other without any message (reduces with
// different roots), must end with Mismatch naming both ranks, well before LOOM_TIMEOUT, over
// shm and over tcp. A legitimately slow rank is not a mismatch.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "comm_harness.hpp"
#include "core/failure_monitor.hpp"
#include "end_together.hpp"
#include "mismatch_helpers.hpp"

using namespace loom;
using Catch::Matchers::Contains;
using Clock = std::chrono::steady_clock;
using loom::test::seconds_since;

namespace {

constexpr auto kTimeout = std::chrono::seconds(30);  // LOOM_TIMEOUT: detection must beat it
constexpr auto kFast = std::chrono::seconds(8);      // "far below": what the checks must meet

// The message paths' checks (unread messages, the stall check): small calls over shm would take
// the arena, whose slots carry each call's identity (test_arena.cpp).
std::map<std::string, std::string> settings_for(const std::string& transports) {
  return {{"LOOM_TRANSPORTS", transports}, {"LOOM_TIMEOUT", "30s"}, {"LOOM_SHM_ONESHOT_MAX", "0"}};
}

std::optional<Error> failure_after(Communicator& comm, const std::function<void()>& call) {
  return loom::test::failure_after(comm, call, kFast);
}

void expect_mismatch(const std::optional<Error>& e, int a, int b, Clock::time_point t0, int rank) {
  loom::test::expect_mismatch(e, a, b, t0, rank, kFast);
}

}  // namespace

// Small messages are all sent eagerly and left unread (found when the ranks go idle); large ones
// wait for a receiver that never comes (found by the stall check).
TEST_CASE("rooted mismatch: broadcast on rank 0, reduce on the others", "[errors][mismatch]") {
  for (const std::string transports : {"shm", "tcp"}) {
    for (std::size_t count : {std::size_t{1024}, std::size_t{4} << 20}) {
      DYNAMIC_SECTION(transports << ", " << count << " floats") {
        loom::test::run_together(
            4,
            [&](Communicator& comm) {
              std::vector<float> buf(count, float(comm.rank() + 1)), out(count, 0.0f);
              const auto t0 = Clock::now();
              auto e = failure_after(comm, [&] {
                if (comm.rank() == 0)
                  comm.broadcast(buf.data(), buf.data(), buf.size(), DataType::Float32, 0).wait();
                else
                  comm.reduce(buf.data(), out.data(), buf.size(), DataType::Float32, RedOp::Sum, 0)
                      .wait();
              });
              INFO(transports);
              CHECK(e.has_value());
              if (!e) return;
              CHECK(e->code() == ErrorCode::Mismatch);
              CHECK_THAT(e->what(), Contains("broadcast #0") && Contains("reduce #0"));
              CHECK_THAT(e->what(), Contains("rank 0"));
              CHECK(seconds_since(t0) < std::chrono::duration<double>(kFast).count());
              // Every later call fails fast with the cause.
              auto later = loom::test::catch_error([&] { comm.barrier().wait(); });
              CHECK(later.code() == ErrorCode::Mismatch);
            },
            settings_for(transports));
      }
    }
  }
}

// The barrier right after the mismatched call reports it: its receives meet the unread messages
// (they did before too, as "expected barrier #1 ... but rank 0 sent broadcast #0"; now the
// message says that call #0 left it unread), or it finds them when it completes, or the idle
// check does first.
TEST_CASE("rooted mismatch: a barrier after broadcast-vs-reduce fails with Mismatch",
          "[errors][mismatch]") {
  for (const std::string transports : {"shm", "tcp"}) {
    SECTION(transports) {
      loom::test::run_together(
          3,
          [&](Communicator& comm) {
            std::vector<std::int64_t> buf(64, comm.rank());
            const auto t0 = Clock::now();
            auto e = loom::test::catch_error([&] {
              if (comm.rank() == 0)
                comm.broadcast(buf.data(), buf.data(), buf.size(), DataType::Int64, 0);
              else
                comm.reduce(buf.data(), nullptr, buf.size(), DataType::Int64, RedOp::Max, 0);
              comm.barrier().wait();
            });
            INFO(transports << ", rank " << comm.rank());
            CHECK(e.code() == ErrorCode::Mismatch);
            // The barrier's receive meets a message of call #0 (or the idle check found one
            // first): either way one that a call #0 left unread, naming rank 0's broadcast or a
            // reduce sent to it.
            CHECK_THAT(e.what(), Contains("left unread") && Contains("rank 0") &&
                                     (Contains("broadcast #0") || Contains("reduce #0")));
            CHECK(seconds_since(t0) < std::chrono::duration<double>(kFast).count());
          },
          settings_for(transports));
    }
  }
}

TEST_CASE("rooted mismatch: broadcasts with different roots", "[errors][mismatch]") {
  for (const std::string transports : {"shm", "tcp"}) {
    SECTION(transports) {
      loom::test::run_together(
          2,
          [&](Communicator& comm) {
            std::vector<std::int32_t> buf(256, comm.rank() + 10);
            const int root = comm.rank();  // each rank believes it is the root
            const auto t0 = Clock::now();
            auto e = failure_after(comm, [&] {
              comm.broadcast(buf.data(), buf.data(), buf.size(), DataType::Int32, root).wait();
            });
            INFO(transports);
            expect_mismatch(e, 0, 1, t0, comm.rank());
            if (e) CHECK_THAT(e->what(), Contains("root 0") && Contains("root 1"));
          },
          settings_for(transports));
    }
  }
}

TEST_CASE("rooted mismatch: reduces with different roots", "[errors][mismatch]") {
  for (const std::string transports : {"shm", "tcp"}) {
    SECTION(transports) {
      for (int n : {2, 4}) {
        loom::test::run_together(
            n,
            [&](Communicator& comm) {
              std::vector<float> buf(512, 1.0f), out(512, 0.0f);
              const int root = comm.rank() == 1 ? 1 : 0;  // rank 1 disagrees
              const auto t0 = Clock::now();
              auto e = failure_after(comm, [&] {
                comm.reduce(buf.data(), out.data(), buf.size(), DataType::Float32, RedOp::Sum, root)
                    .wait();
              });
              INFO(transports << ", " << n << " ranks");
              // Names rank 1 and a rank that called root 0 (rank 0 with 2 ranks).
              expect_mismatch(e, 1, n == 2 ? 0 : 1, t0, comm.rank());
              if (e) CHECK_THAT(e->what(), Contains("root 0") && Contains("root 1"));
            },
            settings_for(transports));
      }
    }
  }
}

// A rank that is merely late (still computing) is not a mismatch: the check compares only the
// calls of ranks that have reached the sequence number.
TEST_CASE("rooted mismatch: a slow rank is not a mismatch", "[errors][mismatch]") {
  for (const std::string transports : {"shm", "tcp"}) {
    SECTION(transports) {
      loom::test::run_ranks(
          3,
          [&](Communicator& comm) {
            std::vector<float> buf(256, float(comm.rank() + 1)), out(256, 0.0f);
            // Two rounds: rank 1 late for the first, rank 2 for the second.
            for (int round = 0; round < 2; ++round) {
              if (comm.rank() == round + 1)
                std::this_thread::sleep_for(std::chrono::milliseconds(1200));
              comm.reduce(buf.data(), out.data(), buf.size(), DataType::Float32, RedOp::Sum, 0)
                  .wait();
              if (comm.rank() == 0) CHECK(out[7] == 6.0f);
              comm.broadcast(buf.data(), buf.data(), buf.size(), DataType::Float32, 2).wait();
              CHECK(buf[0] == 3.0f);
              buf.assign(buf.size(), float(comm.rank() + 1));
            }
            CHECK_FALSE(comm.async_error().has_value());
          },
          {{"LOOM_TRANSPORTS", transports},
           {"LOOM_TIMEOUT", "30s"},
           {"LOOM_MISMATCH_CHECK_AFTER", "200ms"}});
    }
  }
}

TEST_CASE("rooted mismatch: the call-check request codec rejects garbage", "[errors][mismatch]") {
  CHECK(detail::decode_call_check_request(detail::encode_call_check_request(42)) == 42);
  CHECK_FALSE(detail::decode_call_check_request("0").has_value());  // a hang report's request
  CHECK_FALSE(detail::decode_call_check_request("check calls #").has_value());
  CHECK_FALSE(detail::decode_call_check_request("check calls #-1").has_value());
  CHECK_FALSE(detail::decode_call_check_request("check calls #12x").has_value());
}

// Send and receive buffers: disjoint, or in place exactly as documented; any other overlap is
// InvalidArgument naming the call (a partial overlap would read what the call already wrote).
TEST_CASE("buffer checks: partially overlapping send and receive buffers are refused", "[errors]") {
  // Catch2's INFO is not thread-safe: the ranks (threads) collect what went wrong, checked after.
  std::mutex mu;
  std::vector<std::string> wrong;
  loom::test::run_ranks(2, [&](Communicator& comm) {
    const int r = comm.rank();
    std::vector<std::int32_t> mem(64, 0);
    std::int32_t* base = mem.data();
    auto refused = [&](const char* what, const std::function<void()>& call) {
      auto e = loom::test::catch_error(call);
      const std::string msg = e.what();
      if (e.code() == ErrorCode::InvalidArgument &&
          msg.find("rank " + std::to_string(r)) != std::string::npos &&
          msg.find(what) != std::string::npos && msg.find("overlap") != std::string::npos)
        return;
      std::lock_guard lk(mu);
      wrong.push_back(std::string(what) + " on rank " + std::to_string(r) + ": " + msg);
    };
    refused("allreduce", [&] { comm.allreduce(base, base + 2, 8, DataType::Int32, RedOp::Sum); });
    refused("allreduce", [&] { comm.allreduce(base + 2, base, 8, DataType::Int32, RedOp::Sum); });
    refused("broadcast", [&] { comm.broadcast(base + 1, base, 8, DataType::Int32, r); });
    refused("reduce", [&] { comm.reduce(base, base + 7, 8, DataType::Int32, RedOp::Max, r); });
    // allgather: send must be recv + rank * count to be in place; recv itself (rank 1) or any
    // other offset inside recv is refused.
    refused("allgather", [&] { comm.allgather(base + 8 * (1 - r), base, 8, DataType::Int32); });
    refused("allgather", [&] { comm.allgather(base + 3, base, 8, DataType::Int32); });
    refused("allgather", [&] { comm.allgather(base + 12, base + 16, 8, DataType::Int32); });
    // reduce_scatter: recv must be send + rank * recvcount.
    refused("reduce_scatter",
            [&] { comm.reduce_scatter(base, base + 8 * (1 - r), 8, DataType::Int32, RedOp::Sum); });
    refused("reduce_scatter",
            [&] { comm.reduce_scatter(base, base + 5, 8, DataType::Int32, RedOp::Sum); });
    // The exact in-place forms and disjoint buffers work, with correct results.
    for (int i = 0; i < 16; ++i) mem[std::size_t(i)] = r == 0 ? i : 100;
    comm.allgather(base + 8 * r, base, 8, DataType::Int32).wait();
    CHECK(mem[3] == (r == 0 ? 3 : 3));
    CHECK(mem[11] == 100);
    for (int i = 0; i < 16; ++i) mem[std::size_t(i)] = i;
    comm.reduce_scatter(base, base + 8 * r, 8, DataType::Int32, RedOp::Sum).wait();
    CHECK(mem[std::size_t(8 * r)] == 2 * (8 * r));
    for (int i = 0; i < 8; ++i) mem[std::size_t(i)] = 1;
    comm.allreduce(base, base, 8, DataType::Int32, RedOp::Sum).wait();
    CHECK(mem[0] == 2);
    comm.allreduce(base, base + 8, 8, DataType::Int32, RedOp::Sum).wait();
    CHECK(mem[8] == 4);
    comm.reduce(base, base + 8, 8, DataType::Int32, RedOp::Sum, 0).wait();
  });
  INFO((wrong.empty() ? std::string() : wrong.front()));
  CHECK(wrong.empty());
}

// Run by tests/process/rooted_mismatch.sh under loomrun (hidden: real processes, one rank each):
// rank 0 broadcasts while the others reduce to it; every rank must fail with Mismatch naming
// rank 0 and both calls, and prints when.
TEST_CASE("rooted mismatch: process rank (tests/process/rooted_mismatch.sh)",
          "[.process_rooted_mismatch]") {
  Communicator comm = Communicator::from_env();
  std::vector<float> buf(1024, float(comm.rank() + 1)), out(1024, 0.0f);
  comm.barrier().wait();  // every rank connected and in step
  const auto t0 = Clock::now();
  auto e = failure_after(comm, [&] {
    if (comm.rank() == 0)
      comm.broadcast(buf.data(), buf.data(), buf.size(), DataType::Float32, 0).wait();
    else
      comm.reduce(buf.data(), out.data(), buf.size(), DataType::Float32, RedOp::Sum, 0).wait();
  });
  REQUIRE(e.has_value());
  std::printf("rank %d: %s after %.0f ms: %s\n", comm.rank(),
              std::string(to_string(e->code())).c_str(), 1000 * seconds_since(t0), e->what());
  std::fflush(stdout);
  CHECK(e->code() == ErrorCode::Mismatch);
  // Stay until every rank has its outcome: a rank that leaves at once (rank 0 serves the store)
  // would stop failure sharing for the ranks still waiting for a record.
  if (const char* dir = std::getenv("LOOM_TEST_SYNC_DIR")) {
    std::ofstream(std::string(dir) + "/done." + std::to_string(comm.rank())) << "done\n";
    const auto until = Clock::now() + std::chrono::seconds(20);
    auto all_done = [&] {
      for (int r = 0; r < comm.size(); ++r)
        if (!std::ifstream(std::string(dir) + "/done." + std::to_string(r))) return false;
      return true;
    };
    while (!all_done() && Clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}
