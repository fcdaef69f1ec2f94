// Creating a job without a launcher: the parent creates a UniqueId (which starts a rendezvous
// server in this process), forks N ranks, and each rank joins with Communicator(id, rank, N).
// Any way of shipping the 128-byte id works: MPI_Bcast, a file, an environment variable.
//
//   build/bin/loom-example-unique-id 3
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <vector>

#include <loom/loom.hpp>

namespace {

int run_rank(const loom::UniqueId& id, int rank, int nranks) {
  loom::Communicator comm(id, rank, nranks);
  // Each rank gathers everyone's rank number, then they agree on the largest with a max-reduce.
  std::vector<std::int32_t> mine(4, rank), all(4 * static_cast<std::size_t>(nranks));
  comm.allgather(std::span<const std::int32_t>(mine), std::span<std::int32_t>(all)).wait();
  std::int32_t largest = rank;
  comm.allreduce(std::span<std::int32_t>(&largest, 1), loom::RedOp::Max).wait();
  long total = std::accumulate(all.begin(), all.end(), 0L);
  std::printf("rank %d: gathered sum %ld, largest rank %d\n", rank, total, largest);
  return largest == nranks - 1 && total == 4L * nranks * (nranks - 1) / 2 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const int nranks = argc > 1 ? std::atoi(argv[1]) : 3;
  const loom::UniqueId id = loom::UniqueId::create("127.0.0.1");
  std::vector<pid_t> children;
  for (int r = 0; r < nranks; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      try {
        std::_Exit(run_rank(id, r, nranks));
      } catch (const loom::Error& e) {
        std::fprintf(stderr, "rank %d: %s\n", r, e.what());
        std::_Exit(1);
      }
    }
    children.push_back(pid);
  }
  int failed = 0;
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  std::printf("%d of %d ranks succeeded\n", nranks - failed, nranks);
  return failed == 0 ? 0 : 1;
}
