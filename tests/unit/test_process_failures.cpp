// Ranks of tests/process/mismatch_and_split.sh (hidden: they need loomrun and processes): each
// prints its outcome ("rank R: <what>: <code> after <ms> ms: <message>") and exits 0, so that
// loomrun lets every rank report; the script checks the codes, names and times.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "loom/loom.hpp"

using namespace loom;

namespace {

using Clock = std::chrono::steady_clock;

// Runs `call` and prints how it ended on this rank.
void report(const Communicator& comm, const char* what, const std::function<void()>& call) {
  const auto t0 = Clock::now();
  try {
    call();
  } catch (const Error& e) {
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
    std::printf("rank %d: %s: %s after %lld ms: %s\n", comm.rank(), what,
                std::string(to_string(e.code())).c_str(), static_cast<long long>(ms), e.what());
    std::fflush(stdout);
    return;
  }
  std::printf("rank %d: %s: Ok\n", comm.rank(), what);
  std::fflush(stdout);
}

}  // namespace

// Rank 0 sends 16 MiB, then joins an allreduce; rank 1 joins the allreduce first and receives
// after. Each leaves as soon as its call fails: both must report Mismatch.
TEST_CASE("process failures: send and collective in different orders", "[.call_order]") {
  Communicator comm = Communicator::from_env();
  std::vector<float> b(std::size_t{4} << 20, 1.0f), s(1024, 1.0f);
  report(comm, "order", [&] {
    if (comm.rank() == 0) {
      comm.send(b.data(), b.size(), DataType::Float32, 1).wait();
      comm.allreduce(s.data(), s.data(), s.size(), DataType::Float32, RedOp::Sum).wait();
    } else {
      comm.allreduce(s.data(), s.data(), s.size(), DataType::Float32, RedOp::Sum).wait();
      comm.recv(b.data(), b.size(), DataType::Float32, 0).wait();
    }
  });
}

// A gather whose rank 1 passes half the count: the root (rank 0, which serves the rendezvous
// store) finds it and leaves at once; rank 2, not involved, must report Mismatch too: at the
// gather, or, where the root read its message before it found the mismatch (a single-copy read
// may take it whole), at the barrier that follows.
TEST_CASE("process failures: a gather mismatch found by the store's host", "[.gather_mismatch]") {
  Communicator comm = Communicator::from_env();
  const std::size_t count = std::size_t{1} << 20;
  std::vector<float> in(count, 1.0f), out(3 * count);
  report(comm, "gather", [&] {
    comm.gather(in.data(), out.data(), comm.rank() == 1 ? count / 2 : count, DataType::Float32, 0)
        .wait();
    comm.barrier().wait();
  });
}

// Rank 2 of 3 dies (no goodbye) between allreduces; the others, once their allreduce fails,
// call split(): it must fail at once with PeerFailed naming rank 2, not wait for it.
TEST_CASE("process failures: split after a rank died", "[.split_after_failure]") {
  Communicator comm = Communicator::from_env();
  std::vector<float> v(std::size_t{4} << 20, 1.0f);
  try {
    for (int it = 0; it < 1000; ++it) {
      if (comm.rank() == 2 && it == 3) std::_Exit(0);  // loomrun lets the others report
      comm.allreduce(std::span<float>(v), RedOp::Sum).wait();
    }
  } catch (const Error& e) {
    std::printf("rank %d: allreduce: %s: %s\n", comm.rank(),
                std::string(to_string(e.code())).c_str(), e.what());
  }
  report(comm, "split", [&] { (void)comm.split(0, comm.rank()); });
}
