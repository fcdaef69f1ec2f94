// loom-perf --calibrate: measures the cost model's constants (latency per message, link
// bandwidth, reduction throughput) on this machine and prints them as a LOOM_TUNING line.
#pragma once

#include "benchmarks/loom_perf/options.hpp"
#include "loom/communicator.hpp"

namespace loom::perf {

/// Runs the calibration on every rank of `comm`; rank 0 prints. Returns the exit status.
int calibrate(Communicator& comm, const Options& options);

}  // namespace loom::perf
