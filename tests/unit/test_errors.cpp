// Bad arguments, mismatched calls between ranks, timeouts and fail-fast after a failure: each is
// a loom::Error with a code and a message naming the rank and the operation.
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>

#include "comm_harness.hpp"

using namespace loom;
using Catch::Matchers::Contains;
using loom::test::catch_error;

TEST_CASE("errors: bad arguments are InvalidArgument naming rank and operation", "[errors]") {
  loom::test::run_ranks(2, [](Communicator& comm) {
    std::vector<float> buf(16);
    auto e =
        catch_error([&] { comm.allreduce(nullptr, buf.data(), 4, DataType::Float32, RedOp::Sum); });
    CHECK(e.code() == ErrorCode::InvalidArgument);
    CHECK_THAT(e.what(), Contains("rank " + std::to_string(comm.rank())) && Contains("allreduce") &&
                             Contains("send buffer is null"));
    e = catch_error(
        [&] { comm.allreduce(buf.data(), buf.data(), 4, static_cast<DataType>(99), RedOp::Sum); });
    CHECK(e.code() == ErrorCode::InvalidArgument);
    CHECK_THAT(e.what(), Contains("unknown data type"));
    e = catch_error([&] {
      comm.allreduce(buf.data(), buf.data(), 4, DataType::Float32, static_cast<RedOp>(9));
    });
    CHECK_THAT(e.what(), Contains("unknown reduction op"));
    e = catch_error([&] { comm.broadcast(buf.data(), buf.data(), 4, DataType::Float32, 2); });
    CHECK_THAT(e.what(), Contains("root 2 is out of range"));
    e = catch_error(
        [&] { comm.reduce(buf.data(), buf.data(), 4, DataType::Float32, RedOp::Sum, -1); });
    CHECK_THAT(e.what(), Contains("root -1 is out of range"));
    e = catch_error([&] {
      comm.allgather(buf.data(), buf.data(), std::numeric_limits<std::size_t>::max() / 2,
                     DataType::Float64);
    });
    CHECK_THAT(e.what(), Contains("overflows"));
    e = catch_error([&] {
      comm.allreduce(std::span<const float>(buf.data(), 4), std::span<float>(buf.data(), 5),
                     RedOp::Sum);
    });
    CHECK_THAT(e.what(), Contains("span sizes"));
    // A bad call leaves the communicator usable.
    comm.allreduce(std::span<float>(buf), RedOp::Sum).wait();
    // Non-root ranks may pass a null receive buffer to reduce, and count 0 needs no buffers.
    comm.reduce(buf.data(), comm.rank() == 0 ? buf.data() : nullptr, 4, DataType::Float32,
                RedOp::Sum, 0)
        .wait();
    comm.allreduce(nullptr, nullptr, 0, DataType::Float32, RedOp::Sum).wait();
  });
}

TEST_CASE("errors: a moved-from communicator is InvalidUsage", "[errors]") {
  loom::test::run_ranks(1, [](Communicator& comm) {
    Communicator other = std::move(comm);
    auto e = catch_error([&] { (void)comm.rank(); });  // NOLINT(bugprone-use-after-move)
    CHECK(e.code() == ErrorCode::InvalidUsage);
    CHECK(other.size() == 1);
  });
}

TEST_CASE("errors: mismatched counts fail on both ranks naming both", "[errors]") {
  std::atomic<int> mismatches{0};
  loom::test::run_ranks(2, [&](Communicator& comm) {
    std::vector<float> buf(64, 1.0f);
    std::size_t count = comm.rank() == 0 ? 10 : 20;
    auto e = catch_error(
        [&] { comm.allreduce(std::span<float>(buf.data(), count), RedOp::Sum).wait(); });
    CHECK(e.code() == ErrorCode::Mismatch);
    CHECK_THAT(e.what(), Contains("rank 0") && Contains("rank 1") && Contains("allreduce #0"));
    ++mismatches;
    // Every later call fails fast with the original cause.
    auto later = catch_error([&] { comm.barrier().wait(); });
    CHECK(later.code() == ErrorCode::Mismatch);
  });
  CHECK(mismatches == 2);
}

TEST_CASE("errors: different collectives for one sequence number are a Mismatch", "[errors]") {
  loom::test::run_ranks(2, [&](Communicator& comm) {
    std::vector<std::int32_t> a(8, 1), b(16, 0);
    auto e = catch_error([&] {
      if (comm.rank() == 0)
        comm.allgather(a.data(), b.data(), 8, DataType::Int32).wait();
      else
        comm.broadcast(a.data(), a.data(), 8, DataType::Int32, 0).wait();
    });
    // Rank 1 receives rank 0's allgather message where it expects the broadcast: it must say
    // Mismatch naming both calls. Rank 0 gets no message from rank 1 in this op, so it learns of
    // the failure when rank 1 goes away (PeerFailed) -- or Mismatch, if it raced ahead.
    if (comm.rank() == 1) {
      CHECK(e.code() == ErrorCode::Mismatch);
      CHECK_THAT(e.what(), Contains("allgather") && Contains("broadcast") && Contains("rank 0"));
    } else {
      CHECK((e.code() == ErrorCode::PeerFailed || e.code() == ErrorCode::Mismatch));
      CHECK_THAT(e.what(), Contains("rank 0") && Contains("rank 1") && Contains("allgather #0"));
    }
  });
}

TEST_CASE("errors: a rank that never calls makes the others time out naming it", "[errors]") {
  std::atomic<bool> rank0_done{false};
  std::atomic<bool> rank1_done{false};
  loom::test::run_ranks(
      3,
      [&](Communicator& comm) {
        std::vector<float> buf(1000, 1.0f);
        if (comm.rank() == 2) {
          // Stay alive (holding connections open) until both have timed out, without calling.
          while (!rank0_done || !rank1_done) std::this_thread::yield();
          return;
        }
        if (comm.rank() == 1) {
          // Rank 1 times out too (its left neighbour is rank 0, its right rank 2).
          auto e = catch_error([&] { comm.allreduce(std::span<float>(buf), RedOp::Sum).wait(); });
          rank1_done = true;
          CHECK(e.code() == ErrorCode::Timeout);
          return;
        }
        auto e = catch_error([&] { comm.allreduce(std::span<float>(buf), RedOp::Sum).wait(); });
        rank0_done = true;
        // Rank 0 closing its connections before rank 1's deadline would make rank 1 fail with
        // PeerFailed instead: keep them open until rank 1 has timed out as well.
        while (!rank1_done) std::this_thread::yield();
        CHECK(e.code() == ErrorCode::Timeout);
        CHECK_THAT(e.what(), Contains("rank 0") && Contains("allreduce #0") &&
                                 Contains("timed out") && Contains("from rank 2"));
      },
      {{"LOOM_TIMEOUT", "1500ms"}});
}

TEST_CASE("errors: Work::wait with a short timeout leaves the operation running", "[errors]") {
  std::atomic<int> phase{0};
  loom::test::run_ranks(2, [&](Communicator& comm) {
    std::vector<float> buf(100, 1.0f);
    if (comm.rank() == 1) {
      while (phase.load() == 0) std::this_thread::yield();
      comm.allreduce(std::span<float>(buf), RedOp::Sum).wait();
      return;
    }
    Work w = comm.allreduce(std::span<float>(buf), RedOp::Sum);
    auto e = catch_error([&] { w.wait(std::chrono::milliseconds(50)); });
    CHECK(e.code() == ErrorCode::Timeout);
    CHECK_FALSE(w.test());
    phase = 1;
    w.wait();
    CHECK(buf[0] == 2.0f);
  });
}
