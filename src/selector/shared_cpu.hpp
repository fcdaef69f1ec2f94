// Ranks that share a CPU: a host running more ranks than CPUs. Its ranks block instead of
// spinning, take turns on the CPUs and share the host's copy rate, which changes which schedule
// is fastest for small and medium buffers (docs/algorithms.md, "Ranks sharing a CPU"). Every
// rule of the cost model that applies only there is here; with a CPU per rank each function
// returns the neutral value (no extra time, the unshared rate).
#pragma once

#include "selector/shape.hpp"
#include "selector/tuning.hpp"

namespace loom::select {

/// Ranks per CPU (per_host / cores) on a host with more ranks than CPUs, else 1.
double cpu_load(const Shape& s);
/// The ranks of the busiest CPU: ceil(per_host / cores) (3 ranks on 2 CPUs: 2).
double busiest_cpu_ranks(const Shape& s);

namespace shared_cpu {

/// Extra latency of every message: its receiver was blocked and waits behind the other ranks of
/// the busiest CPU (SharedCpuTuning::alpha_us per rank beyond one).
double wakeup_us(const Shape& s, const Tuning& t);

/// The rate of one rank's copies to a rank of its host: the cache rate `cache_gbps` by CPU share
/// while all the host's buffers fit in one CPU's cache, then the host's own total rate over
/// cores x busiest_cpu_ranks shares. `touched`: bytes each rank touches (0: 2 x bytes).
double link_gbps(const Shape& s, const Tuning& t, double bytes, double cache_gbps, double touched);

/// With the automatic single-copy threshold a ring on shared CPUs sends through the slots.
bool ring_sends_eager(const Shape& s, const Tuning& t);

/// A tree hop's latency: the longer of `woken` (its messages' latencies with wake-ups) and the
/// turns of the ranks that send in that hop, on one host.
double tree_hop_us(const Shape& s, const Tuning& t, double chain, double across, double woken);
/// True when an allreduce tree's halves are one eager chunk each and the busiest CPU runs three
/// ranks or more (shm reuses its slots: Tuning::shm): nothing streams and each level is a round
/// of the busiest CPU's ranks.
bool tree_levels_in_rounds(const Shape& s, const Tuning& t, bool eager, double bytes, double chunk);
/// Those levels, up and down: `chunk_us` the chunk's copy with a CPU to itself.
double tree_rounds_us(const Shape& s, double levels, double chunk_us);

/// The ranks in recursive doubling's rounds: on one host the folded ones wait for their result.
Shape rd_round_shape(const Shape& s, int pow2);
/// Latency of a recursive-doubling round (its message, then the reduction step on arrival) when
/// each CPU's ranks take their steps in turn; < 0 where the rule does not apply.
double rd_round_us(const Shape& s, const Tuning& t);
/// Latency of a fold message (`across`: between hosts) when the `folded` ranks take their steps
/// one after another; < 0 where the rule does not apply.
double rd_fold_us(const Shape& s, const Tuning& t, bool across, int folded);
/// The rounds, `round` each with the active ranks only, while the folded ranks still yield
/// (LOOM_YIELD_US=auto) and every rank takes turns; `data_us`: a round's copy and reduction.
double rd_rounds_us(const Shape& s, const Tuning& t, int rounds, double round, double data_us);
/// A folded rank that waited `waited_us` for its result past the yield has blocked: the result
/// waits for its wake-up (SharedCpuTuning::alpha_us) less `copy_us`, the result's copy meanwhile
/// (the receiver is woken at its first slot); 0 where the rule does not apply.
double rd_result_wakeup_us(const Shape& s, const Tuning& t, double waited_us, double copy_us);

}  // namespace shared_cpu
}  // namespace loom::select
