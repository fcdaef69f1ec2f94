// loom-perf --compare-algos A,B[,C...]: at each size the algorithms are timed in turn (a forced
// algorithm per call, on one communicator), --rounds times, so that a slow phase of the machine
// hits them all alike; one table of median times, the fastest, and auto against it.
#pragma once

#include "benchmarks/loom_perf/options.hpp"
#include "loom/communicator.hpp"

namespace loom::perf {

/// Runs the comparison on `comm`; rank 0 prints the table. Returns the exit status (1 when a
/// check found wrong elements).
int run_compare_algos(Communicator& comm, const Options& options);

}  // namespace loom::perf
