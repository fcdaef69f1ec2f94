// The smallest loom program: every rank contributes its rank number, and all ranks get the sum.
//
//   build/bin/loomrun -n 4 build/bin/loom-example-allreduce
#include <cstdio>
#include <vector>

#include <loom/loom.hpp>

int main() {
  try {
    loom::Communicator comm = loom::Communicator::from_env();
    std::vector<float> values(1024, static_cast<float>(comm.rank()));
    comm.allreduce(std::span<float>(values), loom::RedOp::Sum).wait();  // in place, blocking
    const float want = static_cast<float>(comm.size() * (comm.size() - 1) / 2);
    for (float v : values) {
      if (v != want) {
        std::fprintf(stderr, "rank %d: got %g, want %g\n", comm.rank(), v, want);
        return 1;
      }
    }
    std::printf("rank %d of %d: sum of ranks = %g\n", comm.rank(), comm.size(), values[0]);
    return 0;
  } catch (const loom::Error& e) {
    std::fprintf(stderr, "loom error (%s): %s\n", std::string(loom::to_string(e.code())).c_str(),
                 e.what());
    return 1;
  }
}
