#include "selector/shared_cpu.hpp"

#include <algorithm>
#include <cmath>

#include "selector/plan_policy.hpp"

namespace loom::select {

double cpu_load(const Shape& s) {
  return s.cores > 0 && s.per_host > s.cores ? static_cast<double>(s.per_host) / s.cores : 1.0;
}

double busiest_cpu_ranks(const Shape& s) {
  return s.cores > 0 ? std::ceil(static_cast<double>(s.per_host) / s.cores) : 1.0;
}

namespace shared_cpu {
namespace {

// A round in which `steps` of each CPU's `load` ranks (all of them by default) take a step that
// waits for a partner's: the scheduler gives every runnable rank of a CPU an equal share, so a
// step of turn_us takes load turns, and the steps follow one another. Extra over one rank per
// CPU.
double turns_us(const Tuning& t, double load, double steps = 0) {
  if (load <= 1) return 0;
  return t.shared.turn_us * (load * (steps > 0 ? std::min(steps, load) : load) - 1);
}

bool takes_turns(const Shape& s, const Tuning& t) {
  return cpu_load(s) > 1 && t.shared.turn_us > 0;
}

}  // namespace

double wakeup_us(const Shape& s, const Tuning& t) {
  return cpu_load(s) > 1 ? t.shared.alpha_us * (busiest_cpu_ranks(s) - 1.0) : 0;
}

double link_gbps(const Shape& s, const Tuning& t, double bytes, double cache_gbps, double touched) {
  const double load = cpu_load(s);
  // Ranks resume on whichever CPU is free: their buffers stay cached only while all of them fit
  // in one CPU's cache.
  const double core_cache =
      t.shared.core_cache_bytes > 0 ? t.shared.core_cache_bytes : t.host.cache_bytes / s.cores;
  const double per_rank = touched > 0 ? touched : 2 * bytes;
  if (cache_gbps > 0 && per_rank * s.per_host <= core_cache) return cache_gbps / load;
  if (t.shared.gbps <= 0) return t.intra.gbps / load;
  // A CPU's share goes to its ranks equally and the schedule moves at its busiest CPU's pace.
  const double shares = s.cores * busiest_cpu_ranks(s);
  if (!t.shared.curve.empty()) return t.shared.curve.at(bytes * s.per_host) / shares;
  if (t.shared.cache_gbps <= 0) return t.shared.gbps / shares;
  const double dram = t.shared.dram_bytes > 0 ? t.shared.dram_bytes : t.host.dram_bytes;
  return t.host.fall(bytes, t.shared.cache_gbps, t.shared.gbps, dram) / shares;
}

bool ring_sends_eager(const Shape& s, const Tuning& t) {
  return cpu_load(s) > 1 && t.single_copy_bytes == 0;
}

double tree_hop_us(const Shape& s, const Tuning& t, double chain, double across, double woken) {
  if (!takes_turns(s, t)) return woken;
  // On one host a hop's senders are a level of each tree: 2 (n - 1) sends over the levels and
  // the CPUs, each a step of cpu_load turns.
  const double steps =
      s.nhosts > 1 || s.cores <= 0 ? 0 : 2.0 * (s.nranks - 1) / (std::max(1.0, across) * s.cores);
  const double turn = turns_us(t, cpu_load(s), std::max(1.0, steps));
  const double slow = s.nhosts > 1 ? t.inter.alpha_us : t.intra.alpha_us;
  return std::max(woken, chain * (t.intra.alpha_us + turn) + across * (slow + turn));
}

bool tree_levels_in_rounds(const Shape& s, const Tuning& t, bool eager, double bytes,
                           double chunk) {
  return s.nhosts <= 1 && cpu_load(s) > 1 && busiest_cpu_ranks(s) > t.shm.reuse_slots_above &&
         bytes / 2 <= chunk && eager;
}

double tree_rounds_us(const Shape& s, double levels, double chunk_us) {
  // Each rank of the busiest CPU copies about three quarters of a chunk per level.
  constexpr double kChunkShare = 0.75;
  return 2 * levels * kChunkShare * busiest_cpu_ranks(s) * chunk_us;
}

Shape rd_round_shape(const Shape& s, int pow2) {
  Shape active = s;
  if (s.nhosts <= 1) active.nranks = active.per_host = pow2;
  return active;
}

double rd_round_us(const Shape& s, const Tuning& t) {
  if (!takes_turns(s, t)) return -1;
  const double message = s.nhosts > 1 ? t.inter.alpha_us : t.intra.alpha_us;
  return message + t.intra.alpha_us + turns_us(t, cpu_load(s));
}

double rd_fold_us(const Shape& s, const Tuning& t, bool across, int folded) {
  if (!takes_turns(s, t)) return -1;
  const double message = across ? t.inter.alpha_us : t.intra.alpha_us;
  const int on_host = s.nhosts > 1 ? std::min(folded, s.per_host) : folded;
  return message + t.shared.turn_us * cpu_load(s) * on_host / s.cores;
}

double rd_rounds_us(const Shape& s, const Tuning& t, int rounds, double round, double data_us) {
  if (s.nhosts > 1 || !takes_turns(s, t)) return rounds * round;
  // Every rank takes turns until the folded ones stop yielding and block.
  const double crowded = rd_round_us(s, t) + data_us;
  const double yield = static_cast<double>(kAutoYield.count());
  return rounds * crowded <= yield ? rounds * crowded : yield + (rounds - yield / crowded) * round;
}

double rd_result_wakeup_us(const Shape& s, const Tuning& t, double waited_us, double copy_us) {
  if (s.nhosts > 1 || !takes_turns(s, t)) return 0;
  if (waited_us <= static_cast<double>(kAutoYield.count())) return 0;
  return std::max(0.0, t.shared.alpha_us - copy_us);
}

}  // namespace shared_cpu
}  // namespace loom::select
