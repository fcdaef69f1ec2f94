// A correct program whose last call is a collective, run by tests/process/last_call.sh: each
// rank makes its calls, checks the results and exits at once, however far the others are.
//   loom-test-last-call bcast              broadcast one float from rank 0
//   loom-test-last-call reduce ROOT        reduce one float to ROOT
//   loom-test-last-call split ROUNDS       ROUNDS x (split without rank 0, allreduce, destroy)
#include <cstdio>
#include <cstdlib>
#include <loom/loom.hpp>
#include <string>
#include <thread>

namespace {

int check(bool ok, const loom::Communicator& comm, const char* what, float got, float want) {
  if (ok) return 0;
  std::fprintf(stderr, "rank %d: %s: got %g, expected %g\n", comm.rank(), what, got, want);
  return 1;
}

int bcast(loom::Communicator& comm) {
  float x = comm.rank() == 0 ? 42.0f : 0.0f;
  comm.broadcast(std::span<float>(&x, 1), 0).wait();
  return check(x == 42.0f, comm, "broadcast", x, 42.0f);
}

int reduce(loom::Communicator& comm, int root) {
  float x = static_cast<float>(comm.rank() + 1);
  comm.reduce(std::span<float>(&x, 1), loom::RedOp::Sum, root).wait();
  const float want = static_cast<float>(comm.size() * (comm.size() + 1) / 2);
  return comm.rank() == root ? check(x == want, comm, "reduce", x, want) : 0;
}

int split(loom::Communicator& comm, int rounds) {
  for (int i = 0; i < rounds; ++i) {
    loom::Communicator sub = comm.split(comm.rank() == 0 ? -1 : 1, comm.rank());
    if (!sub.valid()) continue;
    float x = 1.0f;
    sub.allreduce(std::span<float>(&x, 1), loom::RedOp::Sum).wait();
    const auto want = static_cast<float>(comm.size() - 1);
    if (check(x == want, sub, "allreduce in the split", x, want) != 0) return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    loom::Communicator comm = loom::Communicator::from_env();
    if (mode == "bcast") return bcast(comm);
    if (mode == "reduce" && argc > 2) return reduce(comm, std::atoi(argv[2]));
    if (mode == "split" && argc > 2) return split(comm, std::atoi(argv[2]));
  } catch (const loom::Error& e) {
    std::fprintf(stderr, "loom error: %s\n", e.what());
    return 2;
  }
  std::fprintf(stderr, "usage: loom-test-last-call bcast | reduce ROOT | split ROUNDS\n");
  return 64;
}
