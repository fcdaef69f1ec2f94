// The latency/bandwidth (alpha-beta) model of loom's schedules, evaluated when a CostTable is
// built (cost_table.hpp), never per call. For each (collective, algorithm, path) it counts the
// messages on the critical path (each costs its link's latency), the bytes the busiest rank
// pushes through its slowest link, the pipeline fill and the bytes it reduces. Links are shared
// memory inside a host and the network across hosts; a host's ranks share its NIC, and ranks
// that share a CPU pay what shared_cpu.hpp adds.
#pragma once

#include <cstddef>

#include "selector/shape.hpp"
#include "selector/tuning.hpp"

namespace loom::select {

/// How a schedule's messages cross shared memory: through the channel's slots, copied in by the
/// sender and out by the receiver (eager), or read once from the sender's buffer (direct: single
/// copy, and every message across hosts).
enum class Path { Eager, Direct };
inline constexpr std::size_t kPaths = 2;

/// A time no schedule reaches: "not a candidate".
inline constexpr double kNever = 1e30;

/// The shared-memory single-copy threshold of this job (Tuning::single_copy_bytes, or the
/// transport's automatic one for the shape's CPU load): smaller messages go eager.
double single_copy_min(const Shape& s, const Tuning& t);

/// The buffer size below which the messages of `a` for `c` take the eager path (kNever: at every
/// size; 0: never).
double eager_below(Coll c, Algo a, const Shape& s, const Tuning& t, const Pipeline& p);

/// Predicted microseconds of `a` for `c` on a buffer of `bytes` (the call's buffer: allreduce,
/// broadcast, reduce; allgather and reduce-scatter: the gathered buffer) along `path`. kNever
/// when `a` has no schedule for `c`; recursive doubling's size limit is the table's.
double model_us(Coll c, Algo a, Path path, double bytes, const Shape& s, const Tuning& t,
                const Pipeline& p);

/// model_us on the path the transport takes for `bytes`, kNever above the row's largest size
/// (recursive doubling: Tuning::rd_max_bytes).
double predict_us(Coll c, Algo a, std::size_t bytes, const Shape& s, const Tuning& t,
                  const Pipeline& p);

/// Bandwidth (GB/s) of one rank's copies to a rank of its host in a collective of `bytes`: the
/// cache plateau and its fall to the memory rate (or the calibrated curve), and on shared CPUs
/// their share. `message`: the schedule's message size (the eager path's rate depends on it);
/// `touched`: what each rank's schedule touches (0: 2 x bytes, its input and output).
double intra_link_gbps(const Shape& s, const Tuning& t, double bytes, double message = 0,
                       double touched = 0, Path path = Path::Direct);

/// The cost formulas of the catalog's rows (catalog.hpp), one per schedule family.
namespace cost {
double ring(Coll c, Path path, double S, const Shape& s, const Tuning& t, const Pipeline& p);
double tree(Coll c, Path path, double S, const Shape& s, const Tuning& t, const Pipeline& p);
double rd(Coll c, Path path, double S, const Shape& s, const Tuning& t, const Pipeline& p);
double deterministic(Coll c, Path path, double S, const Shape& s, const Tuning& t,
                     const Pipeline& p);
double hier(Coll c, Path path, double S, const Shape& s, const Tuning& t, const Pipeline& p);
double bruck(Coll c, Path path, double S, const Shape& s, const Tuning& t, const Pipeline& p);
}  // namespace cost

/// Microseconds to move `bytes` at `gbps` (0 GB/s: free).
constexpr double xfer_us(double bytes, double gbps) {
  return gbps > 0 ? bytes * 1e-3 / gbps : 0;
}

}  // namespace loom::select
