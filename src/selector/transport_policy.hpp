// Transport policy the communicator applies at init: the automatic chunk size, shared-memory
// single-copy threshold and slot order, the wait before blocking, and the ring's smallest step
// part. Kept apart from the cost model so the transports can take them over; docs/algorithms.md
// and docs/performance.md give the measurements behind the numbers.
#pragma once

#include <chrono>
#include <cstddef>

#include "common/status.hpp"
#include "config/config.hpp"

namespace loom::select {

struct Shape;

/// LOOM_CHUNK_SIZE=auto: 128 KiB, whose pipelines keep their chunks in the CPU caches, or 512 KiB
/// when any two ranks talk over ofi, where each large message pays a rendezvous round trip.
constexpr std::size_t kChunkBytes = std::size_t{128} * 1024;
constexpr std::size_t kOfiChunkBytes = std::size_t{512} * 1024;
constexpr std::size_t auto_chunk_bytes(bool uses_ofi) {
  return uses_ofi ? kOfiChunkBytes : kChunkBytes;
}

/// LOOM_SHM_SINGLE_COPY_MIN=auto for a rank whose busiest CPU runs `cpu_load` ranks: 64 KiB, or
/// 32 KiB on a shared CPU, where copies take CPU time the other ranks need and single copy makes
/// one copy of the slots' two.
constexpr std::size_t auto_single_copy_min(double cpu_load) {
  return cpu_load > 1 ? std::size_t{32} * 1024 : std::size_t{64} * 1024;
}

/// LOOM_SHM_SLOT_ORDER=auto: a channel's next message goes to its first slot once the slots are
/// drained (reuse) where the host's busiest CPU runs more than two ranks, whose channels would
/// otherwise evict each other from its caches; with fewer, round-robin (docs/algorithms.md).
constexpr bool auto_reuse_slots(double busiest_cpu_ranks) {
  return busiest_cpu_ranks > 2;
}

/// LOOM_YIELD_US=auto: how long a waiting rank sched_yield()s before it blocks on a wake-up
/// descriptor. The cost model's rules for shared CPUs assume it (docs/algorithms.md).
inline constexpr std::chrono::microseconds kAutoYield{20};

/// LOOM_CHUNK_SIZE: a size in [64, 1G], or 0 for auto (see auto_chunk_bytes).
Result<std::size_t> chunk_from(const config::Config& cfg);
/// LOOM_SHM_SINGLE_COPY_MIN in bytes, 0 for auto (auto_single_copy_min).
Result<std::size_t> single_copy_min_from(const config::Config& cfg);

/// RingParams::min_step_part_bytes for a job of this shape (the same on every rank): smaller
/// parts where ranks share CPUs (algo::kSharedCpuMinStepPartBytes).
std::size_t ring_min_step_part_bytes(const Shape& s);

}  // namespace loom::select
