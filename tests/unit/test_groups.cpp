// Grouped calls (group_start/group_end, loom::Group), threads as ranks: sends and receives that
// would wait for each other complete together; allreduces of one type and op are fused into one
// call (one collective number) with exact results for every member, in and out of place, other
// collectives keep their order; a call's Work cannot be waited for before the group ends; bad
// arguments inside a group fail at the call, naming it; groups nest.
#include <catch2/catch.hpp>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "comm_harness.hpp"

using namespace loom;
using loom::test::error_of;
using loom::test::Findings;

namespace {

// The collective number in status(): "last submitted #N".
long last_submitted(const Communicator& comm) {
  const std::string s = comm.status();
  const auto at = s.find("last submitted #");
  return at == std::string::npos ? -2 : std::stol(s.substr(at + 16));
}

}  // namespace

// Every rank sends 4 MiB to the next and receives from the previous, both posted before either
// completes: without a group the sends would wait for receivers that have not been posted.
TEST_CASE("groups: a ring of large sends and receives in one group completes", "[groups][p2p]") {
  for (const char* t : {"shm", "tcp"})
    for (int n : {2, 3}) {
      Findings f;
      loom::test::run_ranks(n,
                            [&](Communicator& comm) {
                              const int r = comm.rank(), next = (r + 1) % n, prev = (r + n - 1) % n;
                              const std::size_t count = std::size_t{1} << 20;
                              std::vector<std::int32_t> out(count), in(count, -1), out2(7, r),
                                  in2(7, -1);
                              for (std::size_t i = 0; i < count; ++i)
                                out[i] = r * 7 + int(i % 1000);
                              Work a, b, c, d;
                              {
                                Group g(comm);
                                a = comm.send(std::span<const std::int32_t>(out), next, 1);
                                c = comm.send(std::span<const std::int32_t>(out2), next, 2);
                                b = comm.recv(std::span<std::int32_t>(in), prev, 1);
                                d = comm.recv(std::span<std::int32_t>(in2), prev, 2);
                                g.end();
                              }
                              for (Work* w : {&a, &b, &c, &d}) w->wait();
                              for (std::size_t i = 0; i < count; ++i)
                                if (in[i] != prev * 7 + int(i % 1000)) {
                                  f.add(std::string(t) + ": element " + std::to_string(i));
                                  break;
                                }
                              if (in2 != std::vector<std::int32_t>(7, prev))
                                f.add(std::string(t) + ": tag 2");
                            },
                            {{"LOOM_TRANSPORTS", t}, {"LOOM_TIMEOUT", "20s"}});
      INFO(f.first);
      CHECK(f.wrong == 0);
    }
}

// 64 allreduces of mixed sizes (two of them zero) in two type/op classes, in and out of place,
// with a broadcast between them: every result exact, the allreduces of each class one call.
TEST_CASE("groups: allreduces of one type and op are fused, exact, in and out of place",
          "[groups]") {
  for (int n : {3, 4}) {
    Findings f;
    loom::test::run_ranks(n, [&](Communicator& comm) {
      const int r = comm.rank();
      std::vector<std::vector<float>> fin(64), fout(64);
      std::vector<std::vector<std::int32_t>> imax(8);
      std::vector<std::int64_t> bc(33, r == 1 ? 77 : 0);
      const long before = last_submitted(comm);
      comm.group_start();
      for (std::size_t k = 0; k < 64; ++k) {
        const std::size_t count = k == 5 || k == 40 ? 0 : 1 + (k * 37) % 300;
        fin[k].assign(count, float(r + 1) + float(k % 3));
        fout[k].assign(count, -1.0f);
        if (k % 2)
          comm.allreduce(std::span<float>(fin[k]), RedOp::Sum);
        else
          comm.allreduce(std::span<const float>(fin[k]), std::span<float>(fout[k]), RedOp::Sum);
        if (k == 20) comm.broadcast(std::span<std::int64_t>(bc), 1);
        if (k < 8) {
          imax[k].assign(k + 3, r * 10 + int(k));
          comm.allreduce(std::span<std::int32_t>(imax[k]), RedOp::Max);
        }
      }
      comm.group_end();
      comm.barrier().wait();  // every group member is done once a later call is
      // fused float sums + fused int maxes + the broadcast + the barrier
      if (last_submitted(comm) != before + 4)
        f.add("collective numbers used: " + std::to_string(last_submitted(comm) - before));
      const float sum_ranks = float(n * (n + 1)) / 2;
      for (std::size_t k = 0; k < 64; ++k) {
        const auto& got = k % 2 ? fin[k] : fout[k];
        const float want = sum_ranks + float(n) * float(k % 3);
        for (float v : got)
          if (v != want) {
            f.add("float allreduce " + std::to_string(k) + " on rank " + std::to_string(r));
            break;
          }
      }
      for (std::size_t k = 0; k < 8; ++k)
        if (imax[k] != std::vector<std::int32_t>(k + 3, (n - 1) * 10 + int(k)))
          f.add("int max " + std::to_string(k));
      if (bc != std::vector<std::int64_t>(33, 77)) f.add("broadcast");
    });
    INFO(n << " ranks: " << f.first);
    CHECK(f.wrong == 0);
  }
}

// Collectives run before the group's sends and receives on every rank, wherever they were
// called in the group, so ranks that order them differently still match.
TEST_CASE("groups: sends, receives and collectives in any order inside a group", "[groups][p2p]") {
  Findings f;
  loom::test::run_ranks(2, [&](Communicator& comm) {
    const int r = comm.rank();
    std::vector<double> msg(1000, 2.5), got(1000, 0.0), sum(10, double(r + 1));
    comm.group_start();
    if (r == 0) {
      comm.send(std::span<const double>(msg), 1);
      comm.allreduce(std::span<double>(sum), RedOp::Sum);
    } else {
      comm.allreduce(std::span<double>(sum), RedOp::Sum);
      comm.recv(std::span<double>(got), 0);
    }
    comm.group_end();
    comm.barrier().wait();
    if (sum[9] != 3.0) f.add("allreduce");
    if (r == 1 && got[999] != 2.5) f.add("receive");
  });
  INFO(f.first);
  CHECK(f.wrong == 0);
}

TEST_CASE("groups: usage errors are clear, bad calls fail at the call, groups nest",
          "[groups][errors]") {
  Findings f;
  loom::test::run_ranks(2, [&](Communicator& comm) {
    const int r = comm.rank();
    auto e = error_of([&] { comm.group_end(); });
    if (!e || e->code() != ErrorCode::InvalidUsage) f.add("group_end without start");
    std::vector<float> a(16, 1.0f), b(16, 0.0f);
    comm.group_start();
    comm.group_start();  // nested: runs at the outer end
    Work w = comm.allreduce(std::span<float>(a), RedOp::Sum);
    e = error_of([&] { w.wait(); });
    if (!e || e->code() != ErrorCode::InvalidUsage ||
        std::string(e->what()).find("group") == std::string::npos)
      f.add("wait inside a group: " + std::string(e ? e->what() : "no error"));
    comm.group_end();
    e = error_of([&] { w.wait(); });
    if (!e || e->code() != ErrorCode::InvalidUsage) f.add("wait inside the outer group");
    // A bad call inside the group fails at once, naming it; the group goes on without it.
    e = error_of([&] { comm.broadcast(std::span<float>(b), 5); });
    if (!e || e->code() != ErrorCode::InvalidArgument ||
        std::string(e->what()).find("broadcast") == std::string::npos)
      f.add("bad broadcast: " + std::string(e ? e->what() : "no error"));
    e = error_of([&] { comm.send(a.data(), 16, DataType::Float32, r); });
    if (!e || e->code() != ErrorCode::InvalidArgument) f.add("send to self");
    Work v = comm.allreduce(std::span<const float>(a), std::span<float>(b), RedOp::Max);
    comm.group_end();
    w.wait();
    v.wait();
    if (a[0] != 2.0f || b[15] != 2.0f) f.add("results after the group");
  });
  INFO(f.first);
  CHECK(f.wrong == 0);
}

// Fusion is bounded: calls above 256 KiB run alone, the others fill buckets of up to 4 MiB (64
// calls of 128 KiB: two fused calls; one of 1 MiB: its own), every result exact.
TEST_CASE("groups: fused buckets are bounded, large calls run alone", "[groups]") {
  Findings f;
  loom::test::run_ranks(2, [&](Communicator& comm) {
    const int r = comm.rank();
    std::vector<std::vector<std::int32_t>> small(64);
    std::vector<std::int32_t> large(std::size_t{1} << 18, r + 1);
    const long before = last_submitted(comm);
    comm.group_start();
    for (std::size_t k = 0; k < small.size(); ++k) {
      small[k].assign(std::size_t{32} << 10, int(k) + r);
      comm.allreduce(std::span<std::int32_t>(small[k]), RedOp::Sum);
    }
    comm.allreduce(std::span<std::int32_t>(large), RedOp::Sum);
    comm.group_end();
    comm.barrier().wait();
    if (last_submitted(comm) != before + 4)  // two buckets, the large call, the barrier
      f.add("collective numbers used: " + std::to_string(last_submitted(comm) - before));
    for (std::size_t k = 0; k < small.size(); ++k)
      if (small[k].front() != 2 * int(k) + 1 || small[k].back() != 2 * int(k) + 1)
        f.add("small call " + std::to_string(k));
    if (large[12345] != 3) f.add("large call");
  });
  INFO(f.first);
  CHECK(f.wrong == 0);
}
