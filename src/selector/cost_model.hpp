// A latency/bandwidth (alpha-beta) cost model of loom's schedules. For each (collective,
// algorithm) it counts the messages on the critical path (each costs the link's latency alpha),
// the bytes the busiest rank pushes through its slowest link (each costs 1/bandwidth), the
// pipeline fill, and the bytes it reduces (1/reduce bandwidth). The link parameters are per
// transport (shm inside a host, tcp across hosts); a host's ranks share its NIC.
//
// Pure functions: the selector calls them on every collective, loom-sim on modelled clusters.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "collective/kinds.hpp"
#include "common/status.hpp"

namespace loom::select {

// The collective and algorithm vocabulary is the library's (src/collective/kinds.hpp).
using Coll = coll::CollKind;
using coll::Algo;
using coll::to_string;

/// One kind of link: latency per message and bandwidth per direction.
struct Link {
  double alpha_us = 10;  // per message, one way
  double gbps = 1;       // GB/s (1e9 bytes per second)
};

/// A measured curve: (buffer bytes, value) points in increasing size, written
/// "bytes:value/bytes:value/...". `loom-perf --calibrate` measures them.
struct Curve {
  using Point = std::pair<double, double>;  // (bytes, value)
  std::vector<Point> points;

  [[nodiscard]] bool empty() const { return points.empty(); }
  /// A bandwidth's: linear in log2(bytes) between the points, flat beyond the ends.
  [[nodiscard]] double at(double bytes) const;
  /// A time's: linear in bytes between the points, the first point's below them and the last
  /// segment's slope beyond them.
  [[nodiscard]] double linear_at(double bytes) const;
  [[nodiscard]] std::string to_string() const;
  /// Replaces the points with `text`'s ("" clears them); sizes must increase, values be > 0.
  Status parse(std::string_view text);
  /// Every value multiplied by `factor`.
  [[nodiscard]] Curve scaled(double factor) const;

 private:
  [[nodiscard]] std::pair<Point, Point> segment(double bytes) const;
};

/// The constants of the model. Defaults come from the settings registry (LOOM_TUNE_*), which
/// LOOM_TUNING overrides (the format `loom-perf --calibrate` prints).
struct Tuning {
  Link intra{8, 2.0};   // shared memory (ranks on one host)
  Link inter{30, 1.0};  // network (ranks on different hosts)
  double nic_gbps = 0;  // per-host NIC bandwidth shared by the host's ranks; 0: inter.gbps
  double reduce_gbps = 4;
  /// Extra latency per message on a host with more ranks than CPUs, per rank beyond one on the
  /// busiest CPU: ranks then block instead of spinning, so a message waits for its receiver to
  /// be woken and scheduled behind the other ranks of its CPU. P ranks on C cores add
  /// oversub_alpha_us x (ceil(P/C) - 1). Measured on 2 CPUs (8 B allreduce, ranks bound in
  /// blocks), a tree level took 3.1, 2.7, 4.3, 4.4, 6.2 and 5.9 us at 3 to 8 ranks: 0.85 us +
  /// 1.9 x (ceil(P/2) - 1) within 11%, where a rule in 1 - C/P was off by up to 60%.
  double oversub_alpha_us = 0;
  /// Total copy bandwidth of an oversubscribed host, shared by its ranks (each gets
  /// oversub_gbps / P). 0: intra.gbps x cores (each rank's CPU share of the unshared rate).
  /// Time-shared CPUs move more in total than that rule says (measured here: 3-8 ranks on 2
  /// CPUs moved 11.6-15.4 GB/s between them where 2 ranks moved 10.8 through memory).
  double oversub_gbps = 0;
  /// The oversubscribed host's total rate while a buffer fits in cache_bytes (0: oversub_gbps
  /// at every size). From cache_bytes to oversub_dram_bytes it falls log-linearly to
  /// oversub_gbps: measured at 8 ranks on 2 CPUs, 512 KiB moved at 1.37 GB/s per link, 1-4 MiB
  /// at 1.0-1.2 and 8-32 MiB at 0.81-0.85.
  double oversub_cache_gbps = 0;
  /// Where the oversubscribed rate reaches oversub_gbps (0: dram_bytes).
  double oversub_dram_bytes = 0;
  /// A rank's step (send, receive, reduce a small message) on an oversubscribed host, for
  /// schedules in which every rank of the host sends and receives at once (recursive doubling):
  /// each CPU runs its k = P / cores ranks in turn, a step taking k turns (the waiting ranks
  /// yield, and yielding ranks get their share of the CPU too), one step after another, so a
  /// round costs oversub_turn_us x (k^2 - 1) more than on an unshared host. A tree's hop pays
  /// the same (every rank serves both trees); a ring's message pays oversub_alpha_us.
  double oversub_turn_us = 0;
  /// Bandwidth between ranks on one host while a rank's buffer fits in `cache_bytes` (0: the
  /// same as intra.gbps). Small and medium messages move between caches, not through DRAM.
  /// Not on an oversubscribed host, where ranks evict each other's buffers (see Shape).
  double intra_cache_gbps = 0;
  /// Bandwidth between ranks on one host of messages below `single_copy_bytes` (0: the rate
  /// above). Those go through the shared-memory channel's slots, the sender copying in and the
  /// receiver copying out, where larger ones are read once from the sender's buffer; the cache
  /// rate is calibrated with the latter.
  double intra_eager_gbps = 0;
  double cache_bytes = 1 << 20;
  /// A CPU's private cache (L2). Ranks that time-share CPUs resume on whichever one is free, so
  /// an oversubscribed host keeps the cache rate only while all its ranks' buffers fit in one
  /// CPU's cache (0: cache_bytes / cores).
  double core_cache_bytes = 0;
  /// From this buffer size on, intra.gbps applies; between cache_bytes and dram_bytes the
  /// bandwidth falls log-linearly from intra_cache_gbps (0: a step at cache_bytes). Shared
  /// caches and prefetching make the fall gradual, not a cliff.
  double dram_bytes = 0;
  /// The calibrated curve of the link between two ranks on one host (empty: the cache plateau,
  /// log-linear fall and memory rate above). A host's caches fall in steps (here L2, then a
  /// shared L3 that neighbouring VMs use too), which two knees fit badly: 2 ranks on this VM
  /// moved 8.8 GB/s per link at 512 KiB, 5.6 at 1 MiB, 3.0-3.2 at 2-4 MiB, 1.8 at 8 MiB and 1.3
  /// from 16 MiB, where the knees said 2.8 at 8 MiB.
  Curve intra_curve;
  /// The total rate of an oversubscribed host (all its ranks, calibrated with more ranks than
  /// CPUs) by the bytes of the host's buffers, its ranks' together (empty: oversub_cache_gbps
  /// falling to oversub_gbps by one rank's buffer).
  Curve oversub_curve;
  /// A recursive-doubling round between ranks of one host that each have a CPU, in
  /// microseconds by buffer size (its message, the copy and the reduction on arrival), as
  /// calibrated at 8 B, 2 KiB, 32 KiB, 128 KiB and 256 KiB (empty: the link's alpha twice, its
  /// bandwidth and reduce_gbps, which said 2-3x the time of 2 ranks' 4-64 KiB rounds here: their
  /// messages are copied once and reduced in cache). A line between each two points: small messages
  /// cost more per byte (2 ranks here: 1.2 us at 8 B, 2.2 at 2 KiB, 6.2 at 32 KiB). Not on an
  /// oversubscribed host (oversub_turn_us) nor across hosts.
  Curve rd_round_curve;
  /// The eager rate (intra_eager_gbps) by message size, GB/s per link (empty: intra_eager_gbps
  /// at every size). A small message's cache lines cross between the CPUs' caches one latency
  /// after another, a large one's stream: 2 ranks here moved 1 KiB messages at 2.3-2.8 GB/s
  /// and 32 KiB ones at 8-9.
  Curve intra_eager_curve;
  /// 1: on one host the reduction runs inside the receive (shm's fused receive-reduce reads
  /// the peer's data once), so intra.gbps (calibrated with allreduce) already includes it;
  /// 0: a separate pass at reduce_gbps.
  double fused_reduce = 1;
  /// Recursive doubling (allreduce) is considered only for buffers up to this size: it sends
  /// and reduces the whole buffer log2(n) times and needs that much scratch (0: never).
  double rd_max_bytes = 262144;
  /// Not a calibrated constant: the shared-memory transport's single-copy threshold
  /// (LOOM_SHM_SINGLE_COPY_MIN; 0: auto, see auto_single_copy_min; with
  /// LOOM_SHM_SINGLE_COPY=off, no message is single-copy). tuning_from() sets it;
  /// Tuning::apply and to_string leave it out.
  double single_copy_bytes = 0;

  /// "intra_alpha_us=8,intra_gbps=2,inter_alpha_us=30,inter_gbps=1,reduce_gbps=4,..."
  [[nodiscard]] std::string to_string() const;
  /// Applies "key=value,..." on top of *this; unknown keys and bad numbers are errors.
  Status apply(std::string_view text);
};

/// Where the ranks are: `nhosts` hosts of `per_host` ranks each (the last may hold fewer), and
/// the CPUs of a host (0: unknown). A host with more ranks than CPUs is oversubscribed: its
/// ranks share the CPUs that copy and reduce (bandwidth x cores / ranks), and every message
/// waits for its receiver to be woken (+ oversub_alpha_us).
struct Shape {
  int nranks = 1;
  int nhosts = 1;
  int per_host = 1;
  int cores = 0;
  int tree_depth = 0;  // edges from the root to the deepest rank (0: computed from nranks)
};

/// LOOM_CHUNK_SIZE=auto: 128 KiB, whose pipelines keep their chunks in the CPU caches (on the
/// 2-CPU VM 1.1-1.4x the busbw of 512 KiB over shm and tcp from 4 MiB up), or 512 KiB when any
/// two ranks talk over ofi, where each large message pays a rendezvous round trip (tcp;ofi_rxm
/// at 128 KiB: 0.5-0.65x of 512 KiB).
constexpr std::size_t kChunkBytes = std::size_t{128} * 1024;
constexpr std::size_t kOfiChunkBytes = std::size_t{512} * 1024;
constexpr std::size_t auto_chunk_bytes(bool uses_ofi) {
  return uses_ofi ? kOfiChunkBytes : kChunkBytes;
}

/// LOOM_SHM_SINGLE_COPY_MIN=auto for a rank whose busiest CPU runs `cpu_load` ranks: 64 KiB,
/// or 32 KiB on a shared CPU, where copies take CPU time the other ranks need and single copy
/// makes one copy of the slots' two (8 ranks on 2 CPUs: the tree allreduce of 64 KiB, 32 KiB
/// messages, 90-124 us against 153-182; where each rank has a CPU the slots' two copies run in
/// parallel and win, 2 ranks' 64 KiB ring allreduce 9.7 us against 13.9).
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
/// descriptor. 20 us. On a shared CPU 200 us ran faster on 2 CPUs (8 ranks: 32 KiB allreduce
/// 0.71x the time, 256 KiB 0.82x; 4 ranks: 256 KiB 0.65x), but the cost model's oversubscribed
/// rules are fitted to ranks that block after 20 us: with 200 the calibrated per-message wait
/// fell from 2.2 to 0.4 us, and the selector took the tree for 8 ranks' 2-8 KiB, 10-22% slower
/// than recursive doubling. It stays 20 until the model follows (docs/performance.md).
inline constexpr std::chrono::microseconds kAutoYield{20};

struct Pipeline {
  std::size_t chunk_bytes = kChunkBytes;
  std::size_t depth = 4;
};

/// Predicted microseconds for one collective of `bytes` (the call's total: allreduce,
/// broadcast, reduce buffer; allgather/reduce-scatter: the gathered buffer).
double predict_us(Coll c, Algo a, std::size_t bytes, const Shape& s, const Tuning& t,
                  const Pipeline& p);
/// Extra latency per message on an oversubscribed host (see Tuning::oversub_alpha_us).
double oversub_extra_us(const Shape& s, const Tuning& t);
/// Ranks per CPU on an oversubscribed host (per_host / cores), else 1: the inverse of each
/// rank's CPU share. The average, also for ranks bound in blocks whose busiest CPU has
/// ceil(per_host / cores): measured on 2 CPUs, 3, 5 and 7 ranks bound so fit P / cores (36 of
/// 42 cells of the loom-sim validation within 25%) better than the busiest CPU (30).
double cpu_load(const Shape& s);
/// RingParams::min_step_part_bytes for a job of this shape (the same on every rank): smaller
/// parts where ranks share CPUs (algo::kSharedCpuMinStepPartBytes).
std::size_t ring_min_step_part_bytes(const Shape& s);
/// The tuning keys, in the order Tuning::to_string prints them (each has a LOOM_TUNE_<KEY>
/// setting).
std::vector<std::string_view> tuning_keys();
/// Bandwidth (GB/s) of one rank's copies to a rank of its host, for a collective of `bytes`:
/// the cache plateau, the fall to memory bandwidth, and the CPU sharing of an oversubscribed
/// host (see Tuning). `message` is the size of the schedule's messages (0: unknown): below
/// single_copy_bytes they move at intra_eager_gbps instead of the cache rate. `touched` is what
/// each rank's schedule touches (0: 2 x bytes, its input and output), for the cache limit of an
/// oversubscribed host. `buffered`: the messages go through the slots whatever their size.
double intra_link_gbps(const Shape& s, const Tuning& t, double bytes, double message = 0,
                       double touched = 0, bool buffered = false);
/// True when `a` has a schedule for `c` (tree: allreduce, broadcast, reduce; rd: allreduce).
bool supports(Coll c, Algo a);
/// Depth in edges of the deeper of the two trees for `nranks` flat ranks.
int flat_tree_depth(int nranks);

}  // namespace loom::select
