// Misuse that loom refuses at the call or makes safe, threads as ranks: host_free of a buffer a
// send still reads (freed when the send completes, which delivers exact data), a host_alloc the
// host can never back, a send or receive naming rank -1, overlapping receive blocks of an
// alltoallv, and a communicator destroyed inside an open group (its calls' Work fails).
#include <catch2/catch.hpp>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "comm_harness.hpp"
#include "loom/memory.hpp"

using namespace loom;
using Catch::Matchers::Contains;
using loom::test::error_of;

TEST_CASE("misuse: host_free while a send reads the buffer frees it when the send is done",
          "[host_buffers][p2p]") {
  for (std::size_t count : {std::size_t{1000}, std::size_t{16} << 20}) {
    loom::test::run_ranks(
        2,
        [&](Communicator& comm) {
          if (comm.rank() == 0) {
            auto* p = static_cast<std::int32_t*>(host_alloc(count * sizeof(std::int32_t)));
            for (std::size_t i = 0; i < count; ++i) p[i] = static_cast<std::int32_t>(i * 3);
            Work w = comm.send(p, count, DataType::Int32, 1);
            host_free(p);  // deferred: the send still holds it
            w.wait();
            CHECK_THROWS_WITH(host_free(p), Contains("not returned by loom::host_alloc"));
          } else {
            std::vector<std::int32_t> in(count, -1);
            comm.recv(in.data(), count, DataType::Int32, 0).wait();
            for (std::size_t i = 0; i < count; ++i)
              if (in[i] != static_cast<std::int32_t>(i * 3)) {
                FAIL_CHECK("element " << i << ": " << in[i]);
                break;
              }
          }
        },
        {{"LOOM_TRANSPORTS", "shm"}});
  }
}

TEST_CASE("misuse: host_alloc of more than the host's memory fails at the call", "[host_buffers]") {
  auto e = error_of([] { (void)host_alloc(std::size_t{1} << 50); });
  REQUIRE(e);
  CHECK(e->code() == ErrorCode::SystemError);
  CHECK_THAT(e->what(), Contains("more than this host's memory"));
  void* p = host_alloc(4096);  // a size it can back still works
  host_free(p);
}

TEST_CASE("misuse: a send or receive naming rank -1 is refused, described as what it is",
          "[p2p][errors]") {
  loom::test::run_ranks(2, [&](Communicator& comm) {
    std::vector<float> b(16);
    auto s = error_of([&] { comm.send(b.data(), 16, DataType::Float32, -1); });
    REQUIRE(s);
    CHECK(s->code() == ErrorCode::InvalidArgument);
    CHECK_THAT(s->what(), Contains("send to rank -1 (16 x float") && Contains("[0, 2)"));
    auto r = error_of([&] { comm.recv(b.data(), 16, DataType::Float32, -1); });
    REQUIRE(r);
    CHECK_THAT(r->what(), Contains("recv from rank -1") && Contains("recv_any"));
    // Still usable: nothing was numbered.
    std::vector<float> in(16, -1.0f);
    b.assign(16, float(comm.rank()));
    comm.sendrecv(b.data(), 16, 1 - comm.rank(), in.data(), 16, 1 - comm.rank(), DataType::Float32)
        .wait();
    CHECK(in[15] == float(1 - comm.rank()));
  });
}

TEST_CASE("misuse: overlapping receive blocks of an alltoallv are refused", "[exchange][errors]") {
  loom::test::run_ranks(2, [&](Communicator& comm) {
    std::vector<float> in(20, 1.0f), out(20);
    const std::vector<std::size_t> sc = {10, 10}, sd = {0, 10}, rc = {10, 10}, rd = {0, 5};
    auto e = error_of([&] {
      comm.alltoallv(in.data(), std::span(sc), std::span(sd), out.data(), std::span(rc),
                     std::span(rd), DataType::Float32);
    });
    REQUIRE(e);
    CHECK(e->code() == ErrorCode::InvalidArgument);
    CHECK_THAT(e->what(), Contains("receive blocks from ranks 0 and 1 overlap"));
    // Empty blocks may lie anywhere: each rank keeps its own 10 at 0, the other's empty block
    // at 3.
    const auto r = static_cast<std::size_t>(comm.rank());
    std::vector<std::size_t> sc2 = {0, 0}, rc2 = {0, 0}, rd2 = {3, 3};
    sc2[r] = rc2[r] = 10;
    rd2[r] = 0;
    comm.alltoallv(in.data(), std::span(sc2), std::span(sd), out.data(), std::span(rc2),
                   std::span(rd2), DataType::Float32)
        .wait();
    CHECK(out[9] == 1.0f);
  });
}

TEST_CASE("misuse: a communicator destroyed inside an open group fails the group's calls",
          "[groups][errors]") {
  loom::test::run_ranks(2, [&](Communicator& comm) {
    std::vector<float> a(10, 1.0f);
    Work w;
    {
      Communicator c = std::move(comm);
      c.group_start();
      w = c.allreduce(a.data(), a.data(), a.size(), DataType::Float32, RedOp::Sum);
    }  // destroyed before group_end()
    auto e = error_of([&] { w.wait(); });
    REQUIRE(e);
    CHECK(e->code() == ErrorCode::InvalidUsage);
    CHECK_THAT(e->what(), Contains("destroyed before group_end()") && Contains("allreduce #0"));
  });
}
