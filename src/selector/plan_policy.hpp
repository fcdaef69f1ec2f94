// Plan and engine policy the communicator applies at init that the cost model must also know:
// the automatic chunk size (LOOM_CHUNK_SIZE: the plans' pipeline, not one transport's), the wait
// before blocking (the engine's), and the ring's smallest step part (the ring plan's). A
// transport's own policy stays in its folder (shm's single-copy threshold and slot order:
// transports/shm/shm_policy.hpp); the cost model learns it as plain values (Tuning::shm).
// docs/algorithms.md and docs/performance.md give the measurements behind the numbers.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

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

/// LOOM_YIELD_US=auto: how long a waiting rank sched_yield()s before it blocks on a wake-up
/// descriptor. The cost model's rules for shared CPUs assume it (docs/algorithms.md).
inline constexpr std::chrono::microseconds kAutoYield{20};
/// ... and in a call through the shared-memory arena where ranks share CPUs: every rank waits
/// for all the others, which need the CPUs it would otherwise give back only by blocking (8 ranks
/// on 2 CPUs, loom-perf allreduce: 14-22 us at 8 B and 56-87 us at 32 KiB, against 16-24 and
/// 68-110 us with 20; 4 ranks: within the noise; docs/algorithms.md).
inline constexpr std::chrono::microseconds kSharedCpuArenaYield{200};

/// LOOM_SHM_ONESHOT_MAX=auto: collectives whose input per rank is at most 32 KiB, and at most
/// 256 KiB over all ranks (what each rank of an allgather or allreduce reads from the arena),
/// take the shared-memory arena (docs/algorithms.md, "One step through shared memory").
inline constexpr std::size_t kOneshotMaxBytes = std::size_t{32} * 1024;
inline constexpr std::size_t kOneshotReadBytes = std::size_t{256} * 1024;
/// The input bytes per rank up to which a collective of `nranks` ranks takes the arena, from
/// LOOM_SHM_ONESHOT_MAX (`text`: auto, or a size up to 1 MiB; 0: never), in multiples of 64.
Result<std::size_t> oneshot_max_from(const std::string& text, int nranks);

/// LOOM_SHM_ARENA_PIECE=auto: allreduces, allgathers and reduce_scatters above the one-step size
/// take the arena in pieces of 256 KiB per rank (a piece and the blocks folded from it stay in a
/// core's L2 cache), at most 8 MiB over all ranks (the arena then holds at most 16 MiB), on
/// communicators of at least kArenaPieceMinRanks ranks (docs/algorithms.md, "Large calls through
/// the arena"). At 2 ranks a ring moves fewer bytes through memory than the allreduce's steps.
inline constexpr std::size_t kArenaPieceBytes = std::size_t{256} << 10;
inline constexpr std::size_t kArenaMaxPieceBytes = std::size_t{1} << 20;
inline constexpr std::size_t kArenaPieceAllRanksBytes = std::size_t{8} << 20;
inline constexpr std::size_t kArenaMinPieceBytes = std::size_t{4} << 10;
inline constexpr int kArenaPieceMinRanks = 3;
/// The bytes per rank and step of a large call through the arena for `nranks` ranks, from
/// LOOM_SHM_ARENA_PIECE (`text`: auto, or a size from 4 KiB to 1 MiB; 0: never), a multiple of
/// 64; 0 where the communicator has fewer than kArenaPieceMinRanks ranks.
Result<std::size_t> arena_piece_from(const std::string& text, int nranks);

/// LOOM_CHUNK_SIZE: a size in [64, 1G], or 0 for auto (see auto_chunk_bytes).
Result<std::size_t> chunk_from(const config::Config& cfg);

/// RingParams::min_step_part_bytes for a job of this shape (the same on every rank): smaller
/// parts where ranks share CPUs (algo::kSharedCpuMinStepPartBytes).
std::size_t ring_min_step_part_bytes(const Shape& s);

}  // namespace loom::select
