// Run by tests/process/process_calls.sh under loomrun (hidden: real processes, one rank each):
// the calls of docs/collectives.md between processes at odd rank counts with uneven splits,
// each result checked exactly; and a rank that dies while its peer waits in a receive.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "loom/loom.hpp"

using namespace loom;

namespace {

std::int64_t value(int src, int dst, std::size_t i) {
  return src * 1000000 + dst * 1000 + static_cast<std::int64_t>(i);
}

// Returns what went wrong ("" when every result is exact).
std::string check_calls(Communicator& comm) {
  const int r = comm.rank(), n = comm.size();
  const auto un = static_cast<std::size_t>(n);
  // alltoallv: rank r sends (r + 2p) % 4 * 50 + 1 elements to p, packed.
  std::vector<std::size_t> sc(un), rc(un);
  for (int p = 0; p < n; ++p) {
    sc[std::size_t(p)] = std::size_t((r + 2 * p) % 4) * 50 + 1;
    rc[std::size_t(p)] = std::size_t((p + 2 * r) % 4) * 50 + 1;
  }
  std::vector<std::int64_t> out, in;
  for (int p = 0; p < n; ++p)
    for (std::size_t i = 0; i < sc[std::size_t(p)]; ++i) out.push_back(value(r, p, i));
  std::size_t total = 0;
  for (std::size_t c : rc) total += c;
  in.assign(total, -1);
  comm.alltoallv(std::span<const std::int64_t>(out), sc, std::span<std::int64_t>(in), rc).wait();
  std::size_t at = 0;
  for (int p = 0; p < n; ++p)
    for (std::size_t i = 0; i < rc[std::size_t(p)]; ++i)
      if (in[at++] != value(p, r, i)) return "alltoallv from rank " + std::to_string(p);
  // alltoall of 1000 per peer, in place
  std::vector<std::int64_t> blocks(1000 * un);
  for (int p = 0; p < n; ++p)
    for (std::size_t i = 0; i < 1000; ++i) blocks[std::size_t(p) * 1000 + i] = value(r, p, i);
  comm.alltoall(std::span<std::int64_t>(blocks)).wait();
  for (int p = 0; p < n; ++p)
    if (blocks[std::size_t(p) * 1000 + 999] != value(p, r, 999)) return "alltoall";
  // gather to the last rank, scatter from rank 1
  std::vector<std::int64_t> mine(777, r), all(r == n - 1 ? 777 * un : 0);
  comm.gather(std::span<const std::int64_t>(mine), std::span<std::int64_t>(all), n - 1).wait();
  if (r == n - 1)
    for (int p = 0; p < n; ++p)
      if (all[std::size_t(p) * 777 + 776] != p) return "gather";
  std::vector<std::int64_t> parts(r == 1 ? 777 * un : 0), part(777, -1);
  for (std::size_t i = 0; i < parts.size(); ++i) parts[i] = std::int64_t(i / 777) * 3;
  comm.scatter(std::span<const std::int64_t>(parts), std::span<std::int64_t>(part), 1).wait();
  if (part[0] != r * 3 || part[776] != r * 3) return "scatter";
  // a group: large send to the next rank and receive from the previous, and fused allreduces
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  std::vector<float> big(3 << 20, float(r)), got(3 << 20, -1.0f), s1(10, 1.0f), s2(99, 2.0f);
  {
    Group g(comm);
    comm.send(std::span<const float>(big), next, 4);
    comm.recv(std::span<float>(got), prev, 4);
    comm.allreduce(std::span<float>(s1), RedOp::Sum);
    comm.allreduce(std::span<float>(s2), RedOp::Sum);
    g.end();
  }
  comm.barrier().wait();
  if (got.front() != float(prev) || got.back() != float(prev)) return "grouped send/recv";
  if (s1[9] != float(n) || s2[98] != float(2 * n)) return "fused allreduces";
  return "";
}

}  // namespace

TEST_CASE("process calls: every new call between processes (tests/process/process_calls.sh)",
          "[.process_calls]") {
  Communicator comm = Communicator::from_env();
  const std::string wrong = check_calls(comm);
  std::printf("rank %d: %s\n", comm.rank(), wrong.empty() ? "calls OK" : wrong.c_str());
  std::fflush(stdout);
  CHECK(wrong.empty());
}

// Rank 0 dies (no clean exit) while rank 1 waits to receive from it: rank 1 fails with
// PeerFailed naming rank 0, well within LOOM_TIMEOUT, and prints how long it took.
TEST_CASE("process calls: a sender that dies fails the receive (tests/process/process_calls.sh)",
          "[.process_calls_death]") {
  Communicator comm = Communicator::from_env();
  comm.barrier().wait();
  if (comm.rank() == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    // Gone without a goodbye, but with status 0: loomrun lets rank 1 run on to report.
    std::_Exit(0);
  }
  std::vector<float> buf(1024);
  const auto t0 = std::chrono::steady_clock::now();
  std::string outcome = "no error";
  try {
    comm.recv(std::span<float>(buf), 0).wait();
  } catch (const Error& e) {
    outcome = std::string(to_string(e.code())) + ": " + e.what();
  }
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  std::printf("rank %d: after %lld ms: %s\n", comm.rank(), static_cast<long long>(ms),
              outcome.c_str());
  std::fflush(stdout);
}
