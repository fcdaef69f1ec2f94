// The cost model's constants: what the cost table is built from. Defaults come from the
// settings registry (LOOM_TUNE_<KEY>), LOOM_TUNING overrides them with the "key=value,..." line
// `loom-perf --calibrate` prints (or, as "@FILE", the file holding that line).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.hpp"
#include "config/config.hpp"

namespace loom::select {

/// One kind of link: latency per message and bandwidth per direction.
struct Link {
  double alpha_us = 10;  // per message, one way
  double gbps = 1;       // GB/s (1e9 bytes per second)
};

/// Measured points (buffer bytes, value) in increasing size, written "bytes:value/...".
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

 private:
  [[nodiscard]] std::pair<Point, Point> segment(double bytes) const;
};

/// Copies between ranks of one host below the memory rate (Tuning::intra.gbps): a cache plateau
/// up to `cache_bytes` falling log-linearly to the memory rate at `dram_bytes`, or the calibrated
/// `curve`; messages that go through the shared-memory slots (the eager path) at `eager_gbps`
/// or `eager_curve` by message size.
struct HostRates {
  double cache_gbps = 0;         // intra_cache_gbps (0: intra.gbps)
  double eager_gbps = 0;         // intra_eager_gbps (0: the cache rate)
  double cache_bytes = 1 << 20;  // cache_bytes
  double dram_bytes = 0;         // dram_bytes (0: a step at cache_bytes)
  Curve curve;                   // intra_curve (empty: the plateau and the fall)
  Curve eager_curve;             // intra_eager_curve (empty: eager_gbps)

  /// `near` up to cache_bytes, `far` from `dram` bytes, linear in log2(bytes) in between.
  [[nodiscard]] double fall(double bytes, double near, double far, double dram) const;
};

/// A host that runs more ranks than CPUs (shared_cpu.hpp).
struct SharedCpuTuning {
  double alpha_us = 0;          // oversub_alpha_us: wake-up per message per extra rank on a CPU
  double turn_us = 0;           // oversub_turn_us: a rank's step while its CPU's ranks take turns
  double gbps = 0;              // oversub_gbps: the host's total copy rate (0: intra.gbps x CPUs)
  double cache_gbps = 0;        // oversub_cache_gbps: the same while buffers fit in cache_bytes
  double dram_bytes = 0;        // oversub_dram_bytes: where `gbps` starts (0: dram_bytes)
  double core_cache_bytes = 0;  // core_cache_bytes: a CPU's private cache (0: cache_bytes / CPUs)
  Curve curve;                  // oversub_curve: the host's total rate by all its ranks' bytes
};

/// The shared-memory transport's automatic choices, which the cost model predicts: plain values
/// that transport states (its cost facts in the transport registry, which the communicator and
/// loom-sim copy in: core/planner.hpp's plan_tuning). The defaults are shm's own, so a Tuning
/// built without a communicator predicts the same (a unit test holds them equal). Not
/// LOOM_TUNE keys: apply and to_string leave them out.
struct ShmAuto {
  double single_copy_min = 64 * 1024;             // LOOM_SHM_SINGLE_COPY_MIN=auto, a CPU per rank
  double shared_cpu_single_copy_min = 32 * 1024;  // the same where ranks share a CPU
  /// LOOM_SHM_SLOT_ORDER=auto reuses a channel's first slot where the host's busiest CPU runs
  /// more ranks than this.
  double reuse_slots_above = 2;
};

struct Tuning {
  Link intra{8, 2.0};   // shared memory (ranks on one host): intra_alpha_us, intra_gbps
  Link inter{30, 1.0};  // network (ranks on different hosts): inter_alpha_us, inter_gbps
  double nic_gbps = 0;  // a host's NIC, shared by its ranks' streams (0: inter.gbps)
  /// A token bucket on the NICs (nic_burst_bytes): a call whose bytes through a host's NIC fit
  /// in it leaves at `line_gbps` (not a key: with_network's uncapped rate) while the bucket
  /// refills at the capped rate in between. 0: no bucket.
  double nic_burst_bytes = 0;
  double line_gbps = 0;
  double reduce_gbps = 4;
  /// 1: on one host the reduction runs inside the receive, so intra.gbps includes it.
  double fused_reduce = 1;
  /// Recursive doubling is a candidate up to this buffer size (0: never).
  double rd_max_bytes = 262144;
  /// A recursive-doubling round on one host whose ranks each have a CPU, in us by buffer size
  /// (empty: two latencies, the link's bandwidth and the reduction).
  Curve rd_round_curve;
  HostRates host;
  SharedCpuTuning shared;
  /// Not calibrated: the shared-memory single-copy threshold (LOOM_SHM_SINGLE_COPY_MIN; 0: auto;
  /// 1e30 with LOOM_SHM_SINGLE_COPY=off), from that transport's cost facts like `shm`; apply and
  /// to_string leave it out.
  double single_copy_bytes = 0;
  ShmAuto shm;

  /// "intra_alpha_us=8,intra_gbps=2,inter_alpha_us=30,..." (every key, see tuning_keys()).
  [[nodiscard]] std::string to_string() const;
  /// Applies "key=value,..." on top of *this; unknown keys and bad numbers are errors.
  Status apply(std::string_view text);
};

/// `t` with the network a host states (a link's rate `link_gbps` in GB/s, `links` of them; 0:
/// unknown, `t` unchanged), unless `t.nic_gbps` is set (LOOM_TUNE_NIC_GBPS): one stream between
/// hosts runs at most at one link's rate, and a host's streams share all its links. `burst_bytes`:
/// the links' token bucket (0: none; nic_burst_bytes, unless set), which lets that much leave at
/// the uncapped rate (inter.gbps as it was: line_gbps).
Tuning with_network(Tuning t, double link_gbps, int links, double burst_bytes = 0);

/// The tuning keys, in the order Tuning::to_string prints them (each has a LOOM_TUNE_<KEY>
/// setting).
std::vector<std::string_view> tuning_keys();

/// The constants from the registry: LOOM_TUNE_* settings, then LOOM_TUNING on top ("@FILE": the
/// LOOM_TUNING line in that file, as `loom-perf --calibrate` prints it). The transports' facts
/// (single_copy_bytes, shm) keep their defaults: core's plan_tuning adds them.
Result<Tuning> tuning_from(const config::Config& cfg);

}  // namespace loom::select
