// What the MPI baselines (mpi-allreduce-perf, mpi-exchange-perf) share: the library's name for
// the table's header, and main(): MPI_Init, the program's run, MPI_Finalize; an exception prints
// "PROGRAM: error: ..." and aborts the job with kExitError.
#pragma once

#include <mpi.h>

#include <cstdio>
#include <exception>
#include <string>

#include "benchmarks/baselines/common.hpp"

namespace loom::baselines {

/// The MPI library's name and version, up to its first comma ("Open MPI v4.1.4").
inline std::string mpi_library_name() {
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(version, &length);
  std::string text(version, static_cast<std::size_t>(length));
  if (const std::size_t comma = text.find(','); comma != std::string::npos) text.resize(comma);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

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
