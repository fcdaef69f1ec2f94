// Options for communicators and for single calls.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>

namespace loom {

/// Per-communicator options. Every field left empty takes its value from the LOOM_* settings
/// (see `loom-info`), which in turn default to documented values.
struct CommOptions {
  /// Deadline for every blocking wait inside loom (LOOM_TIMEOUT).
  std::optional<std::chrono::milliseconds> timeout;
  /// Overrides for any LOOM_* setting, by name, e.g. {"LOOM_SOCKETS_PER_PEER", "4"}.
  std::map<std::string, std::string> settings;
  /// Bitwise-reproducible reductions (LOOM_DETERMINISTIC): every element is reduced in rank
  /// order 0..n-1 whatever the algorithm, chunk size or topology.
  std::optional<bool> deterministic;
};

/// Algorithm hint for one call; Auto lets loom's selector choose (LOOM_ALGO). A hint for a
/// collective without that schedule (tree: allreduce, broadcast, reduce; recursive doubling:
/// allreduce; hierarchical: allreduce, allgather, reduce_scatter; Bruck's log-depth schedules:
/// allgather, reduce_scatter) is ignored, and so is a hierarchical hint where the hosts hold
/// different numbers of ranks or there is one host.
enum class Algorithm { Auto = 0, Ring, Tree, RecursiveDoubling, Hierarchical, Bruck };

/// Per-call options. Default-constructed options mean "as configured".
struct CollOptions {
  /// Deadline for this call, overriding the communicator's timeout.
  std::optional<std::chrono::milliseconds> timeout;
  /// Force an algorithm for this call.
  Algorithm algorithm = Algorithm::Auto;
  /// CUDA stream (a cudaStream_t, as void* so code without CUDA headers compiles) for device
  /// buffers. With a stream or device buffers the call is stream-ordered, as in NCCL: it returns
  /// once enqueued, and later work on the stream sees the result (the returned Work reports
  /// completion of loom's part and errors; synchronise the stream to see the data). Device
  /// buffers with nullptr mean the default stream. Host and device buffers must not be mixed in
  /// one call. See docs/gpu.md.
  void* stream = nullptr;
  /// RedOp::PreMulSum's scalar: this rank multiplies its input by it before the sum (each rank
  /// may pass its own, as FSDP's 1/n gradient divisor). The input buffer is left unchanged
  /// unless the call is in place. Ignored by every other op.
  double scalar = 1.0;
};

}  // namespace loom
