// The main() of the MPI baselines (mpi-allreduce-perf, mpi-exchange-perf): MPI_Init, the
// program's run, MPI_Finalize; an exception prints "PROGRAM: error: ..." and aborts the job with
// kExitError.
#pragma once

#include <mpi.h>

#include <cstdio>
#include <exception>

#include "benchmarks/baselines/common.hpp"

namespace loom::baselines {

inline int mpi_main(int argc, char** argv, const char* program, int (*run)(int, char**)) {
  MPI_Init(&argc, &argv);
  int status = 0;
  try {
    status = run(argc, argv);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "%s: error: %s\n", program, e.what());
    MPI_Abort(MPI_COMM_WORLD, kExitError);
  }
  MPI_Finalize();
  return status;
}

}  // namespace loom::baselines
