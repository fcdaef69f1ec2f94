// Carrying on after a rank dies: a loop of allreduces that, when a peer fails (killed, crashed,
// its node lost), drops the failed ranks with shrink() and continues with the survivors, in the
// same processes, without restarting the job.
//
//   loom-example-shrink [iterations [count]]
//
// Run it with one process per rank (LOOM_RANK, LOOM_WORLD_SIZE, LOOM_ROOT in the environment)
// and kill -9 any one of them while it runs. Rank 0 too: it hosts the rendezvous store, so
// shrink() moves the store to the lowest survivor's standby listener (opened at init). loomrun
// stops the whole job when a rank dies, which is what most jobs want, so tests start the ranks
// themselves (tests/process/fault_tolerance.sh).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <loom/loom.hpp>
#include <string>
#include <vector>

namespace {

long long now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 100;
  const std::size_t count = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1 << 20;
  try {
    loom::Communicator comm = loom::Communicator::from_env();
    const int me = comm.rank();             // rank in the original job
    std::vector<int> members(comm.size());  // original rank of each current rank
    for (int r = 0; r < comm.size(); ++r) members[r] = r;
    std::vector<float> values(count);
    for (int it = 0; it < iterations; ++it) {
      // Each rank contributes (original rank + 1 + it % 7): every sum is an exact integer.
      for (float& v : values) v = static_cast<float>(me + 1 + it % 7);
      float want = 0;
      for (int m : members) want += static_cast<float>(m + 1 + it % 7);
      std::printf("rank %d: iteration %d started\n", me, it);
      std::fflush(stdout);
      try {
        comm.allreduce(std::span<float>(values), loom::RedOp::Sum).wait();
      } catch (const loom::Error& e) {
        if (e.code() != loom::ErrorCode::PeerFailed) throw;
        std::vector<int> failed = comm.failed_ranks();
        std::printf("rank %d: PeerFailed at %lld ms: %s\n", me, now_ms(), e.what());
        std::fflush(stdout);
        if (failed.empty()) throw;
        std::vector<int> survivors;
        for (int r = 0; r < comm.size(); ++r) {
          bool gone = false;
          for (int f : failed) gone = gone || f == r;
          if (!gone) survivors.push_back(members[r]);
        }
        comm = comm.shrink(failed);  // collective over the survivors
        members = survivors;
        // A rank may have finished this iteration before the failure reached it and failed in
        // the next one: agree on the earliest failed iteration and redo from there.
        std::int32_t redo = it;
        comm.allreduce(std::span<std::int32_t>(&redo, 1), loom::RedOp::Min).wait();
        std::printf("rank %d: carrying on as rank %d of %d from iteration %d\n", me, comm.rank(),
                    comm.size(), redo);
        std::fflush(stdout);
        it = redo - 1;
        continue;
      }
      for (float v : values)
        if (v != want) {
          std::fprintf(stderr, "rank %d: iteration %d: got %g, want %g\n", me, it, v, want);
          return 1;
        }
    }
    std::printf("rank %d: done, %d iterations correct on %d ranks\n", me, iterations, comm.size());
    return 0;
  } catch (const loom::Error& e) {
    std::fprintf(stderr, "loom error (%s): %s\n", std::string(loom::to_string(e.code())).c_str(),
                 e.what());
    return 1;
  }
}
