// The shared-memory transport's policy: the automatic choices for a rank from how many ranks
// share its CPUs (the single-copy threshold and the slot order). docs/algorithms.md gives the
// measurements behind the numbers; the cost model learns the same thresholds as plain values
// (shm_factory.cpp's cost facts, through the transport registry, into select::Tuning::shm) to
// predict what shm does. Depends on common and config only.
#pragma once

#include <cstddef>

#include "common/status.hpp"
#include "config/config.hpp"

namespace loom::transport::shm {

/// LOOM_SHM_SINGLE_COPY_MIN=auto for a rank whose busiest CPU runs `cpu_load` ranks: 64 KiB, or
/// 32 KiB on a shared CPU, where copies take CPU time the other ranks need and single copy makes
/// one copy of the slots' two.
inline constexpr std::size_t kSingleCopyMin = std::size_t{64} * 1024;
inline constexpr std::size_t kSharedCpuSingleCopyMin = std::size_t{32} * 1024;
constexpr std::size_t auto_single_copy_min(double cpu_load) {
  return cpu_load > 1 ? kSharedCpuSingleCopyMin : kSingleCopyMin;
}

/// LOOM_SHM_SLOT_ORDER=auto: a channel's next message goes to its first slot once the slots are
/// drained (reuse) where the host's busiest CPU runs more than two ranks, whose channels would
/// otherwise evict each other from its caches; with fewer, round-robin (docs/algorithms.md).
inline constexpr double kReuseSlotsAbove = 2;
constexpr bool auto_reuse_slots(double busiest_cpu_ranks) {
  return busiest_cpu_ranks > kReuseSlotsAbove;
}

/// LOOM_SHM_SINGLE_COPY_MIN in bytes, 0 for auto (auto_single_copy_min).
Result<std::size_t> single_copy_min_from(const config::Config& cfg);

/// LOOM_SHM_SINGLE_COPY_MAX=auto where process_vm_readv is slower than memcpy: one slot. The
/// slots cannot overlap the two copies of a message that fits in one, so one copy wins even at a
/// slower rate; larger messages pipeline through the slots. Where the rank shares its CPU, an
/// all-to-all's or a send's message takes single copy at any size: every rank sends and receives
/// alike there, and CPU time per byte decides, one copy against two (docs/transports.md, "Single
/// copy").
struct SingleCopyMax {
  std::size_t any = 0;       // every message the receiver copies
  std::size_t exchange = 0;  // all-to-all(v) and send/recv messages
};
inline constexpr std::size_t kNoLimit = ~std::size_t{0};
constexpr SingleCopyMax auto_single_copy_max(std::size_t slot_bytes, double cpu_load) {
  return {slot_bytes, cpu_load > 1 ? kNoLimit : slot_bytes};
}

/// LOOM_SHM_SINGLE_COPY_MAX in bytes, 0 for auto (auto_single_copy_max).
Result<std::size_t> single_copy_max_from(const config::Config& cfg);

}  // namespace loom::transport::shm
