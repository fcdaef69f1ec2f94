// Creating a job without a launcher: the parent forks N ranks, creates a UniqueId (which starts a
// rendezvous server thread in this process) and ships its 128 bytes to each rank over a pipe;
// each rank joins with Communicator(id, rank, N). Any way of shipping the id works: MPI_Bcast, a
// file, an environment variable. (Fork before the id exists: a child forked from a process with
// running threads may inherit a lock one of them held and hang.)
//
//   build/bin/loom-example-unique-id 3
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <loom/loom.hpp>
#include <numeric>
#include <stdexcept>
#include <vector>

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
  std::fflush(stdout);  // the rank leaves with _Exit, which does not flush
  return largest == nranks - 1 && total == 4L * nranks * (nranks - 1) / 2 ? 0 : 1;
}

// Reads the id's bytes from `fd` (the parent writes them once it has created the id).
loom::UniqueId read_id(int fd) {
  std::array<std::uint8_t, loom::UniqueId::kBytes> bytes{};
  std::size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = read(fd, bytes.data() + got, bytes.size() - got);
    if (n <= 0) throw std::runtime_error("the parent closed the id pipe early");
    got += static_cast<std::size_t>(n);
  }
  return loom::UniqueId::from_bytes(bytes);
}

}  // namespace

int main(int argc, char** argv) {
  const int nranks = argc > 1 ? std::atoi(argv[1]) : 3;
  std::vector<pid_t> children;
  std::vector<int> pipes;
  for (int r = 0; r < nranks; ++r) {
    int fds[2];
    if (pipe(fds) != 0) return 1;
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[1]);
      try {
        std::_Exit(run_rank(read_id(fds[0]), r, nranks));
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", r, e.what());
        std::_Exit(1);
      }
    }
    close(fds[0]);
    children.push_back(pid);
    pipes.push_back(fds[1]);
  }
  const loom::UniqueId id = loom::UniqueId::create("127.0.0.1");
  const auto bytes = id.to_bytes();
  for (int fd : pipes) {
    if (write(fd, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size()))
      std::fprintf(stderr, "could not ship the id to a rank\n");
    close(fd);
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
