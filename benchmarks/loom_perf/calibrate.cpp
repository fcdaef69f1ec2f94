#include "benchmarks/loom_perf/calibrate.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/host/reduce.hpp"
#include "selector/plan_policy.hpp"
#include "selector/tuning.hpp"
#include "transports/shm/shm_policy.hpp"

namespace loom::perf {
namespace {

using Clock = std::chrono::steady_clock;

// Issues `count` calls of `fn` back to back, then waits for all of them.
void issue_and_wait(int count, const std::function<Work()>& fn) {
  std::vector<Work> works;
  works.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) works.push_back(fn());
  for (const Work& w : works) w.wait();
}

// Seconds per call of `fn` (after `warmup` calls), the slowest rank's. Calls are issued back to
// back and waited for at the end, exactly as the loom-perf sweep times them, so the constants
// predict loom-perf's numbers (a wait per call would add a wake-up to every message). Timed in
// kBatches batches, the median batch counts: on shared VMs a slow phase of the machine can
// last longer than a batch, and one such batch would skew a mean.
constexpr int kBatches = 3;
double time_per_call(Communicator& comm, int warmup, int iters, const std::function<Work()>& fn) {
  issue_and_wait(warmup, fn);
  std::array<double, kBatches> local{}, slowest{};
  for (double& t : local) {
    comm.barrier().wait();
    auto t0 = Clock::now();
    issue_and_wait(iters, fn);
    t = std::chrono::duration<double>(Clock::now() - t0).count() / iters;
  }
  comm.allreduce(local.data(), slowest.data(), kBatches, DataType::Float64, RedOp::Max).wait();
  std::sort(slowest.begin(), slowest.end());
  return slowest[kBatches / 2];
}

// Seconds per call (as time_per_call) of a forced-`algorithm` fp32 sum allreduce of `bytes`.
double allreduce_seconds(Communicator& comm, Algorithm algorithm, std::size_t bytes, int warmup,
                         int iters) {
  CollOptions forced;
  forced.algorithm = algorithm;
  std::vector<float> in(bytes / 4, 1.0f), out(bytes / 4);
  return time_per_call(comm, warmup, iters, [&] {
    return comm.allreduce(in.data(), out.data(), in.size(), DataType::Float32, RedOp::Sum, forced);
  });
}

// Bytes of reduction output per second of the host kernel (fp32 sum, 8 MiB operands).
double reduce_gbps() {
  const std::size_t count = std::size_t{2} << 20;
  std::vector<float> a(count, 1.0f), b(count, 2.0f), d(count);
  kernels::reduce(DataType::Float32, RedOp::Sum, d.data(), a.data(), b.data(), count);
  double best = 1e30;
  for (int rep = 0; rep < 8; ++rep) {
    auto t0 = Clock::now();
    kernels::reduce(DataType::Float32, RedOp::Sum, d.data(), a.data(), b.data(), count);
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return static_cast<double>(count * 4) / best / 1e9;
}

bool one_host(Communicator& comm) {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  std::uint64_t h = std::hash<std::string>{}(name) >> 1, lo = 0, hi = 0;
  comm.allreduce(&h, &lo, 1, DataType::Uint64, RedOp::Min).wait();
  comm.allreduce(&h, &hi, 1, DataType::Uint64, RedOp::Max).wait();
  return lo == hi;
}

using Point = std::pair<std::size_t, double>;  // (buffer bytes, GB/s per link)

// Per-link bandwidth at sizes from 256 KiB to the largest (at most 64 MiB), doubling: small
// buffers move between caches, large ones through memory. On one host it times ring allreduce,
// whose fused receive-reduce makes the reduction part of the link's cost (the model's
// fused_reduce); across hosts ring allgather (copies only; reductions are a separate pass).
std::vector<Point> bandwidth_curve(Communicator& comm, const Options& options, double alpha_us,
                                   bool allreduce) {
  const int n = comm.size();
  CollOptions ring;
  ring.algorithm = Algorithm::Ring;
  const std::size_t largest =
      std::clamp<std::size_t>(options.max_bytes, 1 << 20, std::size_t{64} << 20);
  std::vector<Point> bw;
  for (std::size_t total = 256 << 10; total <= largest; total *= 2) {
    const std::size_t count = total / 4;
    const std::size_t per_rank = count / static_cast<std::size_t>(n);
    std::vector<float> in(count, 1.0f), out(count);
    // Enough calls that a batch lasts tens of milliseconds (loom-perf's sweep, which the model
    // is checked against, averages 40 calls of 8 MiB; batches of 4 came out 5-10% slower).
    const int reps = total <= (4 << 20) ? 20 : 10;
    const double t = time_per_call(comm, 2, reps, [&] {
      if (allreduce)
        return comm.allreduce(in.data(), out.data(), count, DataType::Float32, RedOp::Sum, ring);
      return comm.allgather(in.data(), out.data(), per_rank, DataType::Float32, ring);
    });
    const double frac = static_cast<double>(n - 1) / n;
    const double hops = allreduce ? 2.0 * (n - 1) : n - 1.0;
    const double moved = (allreduce ? 2 : 1) * frac * static_cast<double>(total);
    const double wire = std::max(t - hops * alpha_us * 1e-6, t * 0.1);
    bw.emplace_back(total, moved / wire / 1e9);
  }
  return bw;
}

// The eager path of shared memory: messages below the single-copy threshold go through the
// channel's slots, copied in by the sender and out by the receiver, where the curve above moves
// single-copy messages. A ring allreduce with messages of `message` bytes.
Point eager_point(Communicator& comm, double alpha_us, std::size_t message) {
  const int n = comm.size();
  const std::size_t total = message * static_cast<std::size_t>(n);
  const double t = allreduce_seconds(comm, Algorithm::Ring, total, 50, 200);
  const double moved = 2.0 * (n - 1) / n * static_cast<double>(total);
  const double wire = std::max(t - 2.0 * (n - 1) * alpha_us * 1e-6, t * 0.1);
  return {total, moved / wire / 1e9};
}

// Microseconds per round of a recursive-doubling allreduce of 8 B, where every rank sends and
// receives in every round (log2 of the largest power of two <= n rounds, plus a fold and a
// return message when n is not a power of two).
double rd_round_us(Communicator& comm, const Options& options, int warmup) {
  const double t =
      allreduce_seconds(comm, Algorithm::RecursiveDoubling, 8, warmup, std::max(options.iters, 50));
  const auto n = static_cast<unsigned>(comm.size());
  const int rounds = std::bit_width(n) - 1 + (std::has_single_bit(n) ? 0 : 2);
  return t * 1e6 / rounds;
}

// A recursive-doubling round where each rank has a CPU, by buffer size: 8 B (`round_us`,
// timed with the other small constants), 2 KiB, 32 KiB (half the automatic single-copy
// threshold: one eager message a round, copied and reduced in cache), 128 KiB and 256 KiB
// (single copy; the default LOOM_TUNE_RD_MAX_BYTES). Only for a power of two of ranks (no
// fold); empty otherwise.
select::Curve rd_round_curve(Communicator& comm, double round_us) {
  select::Curve curve;
  const auto n = static_cast<unsigned>(comm.size());
  if (!std::has_single_bit(n)) return curve;
  const int rounds = std::bit_width(n) - 1;
  curve.points.emplace_back(8.0, round_us);
  for (const std::size_t total : {std::size_t{2048}, transport::shm::auto_single_copy_min(1.0) / 2,
                                  std::size_t{128} << 10, std::size_t{256} << 10}) {
    const double t = allreduce_seconds(comm, Algorithm::RecursiveDoubling, total, 50, 200);
    curve.points.emplace_back(static_cast<double>(total), t * 1e6 / rounds);
  }
  return curve;
}

}  // namespace

int calibrate(Communicator& comm, const Options& options) {
  const int n = comm.size();
  const bool print = comm.rank() == 0;
  const double red = reduce_gbps();
  if (n < 2) {
    if (print)
      fmt::print("# one rank: only the reduction is measured\nLOOM_TUNING=reduce_gbps={:.3g}\n",
                 red);
    return 0;
  }
  const int iters = std::max(options.iters, 50);
  // The small-message constants, the ring's alpha and recursive doubling's round (whose
  // difference between 2 and 8 ranks is the oversubscribed turn): a few milliseconds each, so
  // one measurement can fall entirely into a slow phase of a shared machine (the turn came out
  // 2.79 and 3.73 us in two runs of the same binary). Measured kSmallReps times, alternately,
  // the medians count.
  constexpr int kSmallReps = 7;
  std::array<double, kSmallReps> smalls{}, rounds{};
  for (int rep = 0; rep < kSmallReps; ++rep) {
    smalls[rep] = allreduce_seconds(comm, Algorithm::Ring, 8, rep == 0 ? options.warmup : 5, iters);
    rounds[rep] = rd_round_us(comm, options, rep == 0 ? options.warmup : 5);
  }
  std::sort(smalls.begin(), smalls.end());
  std::sort(rounds.begin(), rounds.end());
  const double t_small = smalls[kSmallReps / 2];
  const double alpha_us = t_small * 1e6 / (2.0 * (n - 1));
  const double round_us = rounds[kSmallReps / 2];
  const bool intra = one_host(comm);
  // Before the curve: its large calls leave the executor's adaptive spin budget short (long
  // waits shrink it), which small calls right after would pay for.
  // Eager messages of 1 KiB and of half the automatic threshold (32 KiB where each rank has a
  // CPU, 16 KiB where ranks share them: LOOM_SHM_SINGLE_COPY_MIN=auto).
  const long cpus = std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN));
  const bool oversubscribed = intra && n > cpus;
  const std::size_t large_message =
      transport::shm::auto_single_copy_min(static_cast<double>(n) / static_cast<double>(cpus)) / 2;
  const Point small_eager = intra ? eager_point(comm, alpha_us, 1024) : Point{0, 0.0};
  const Point eager = intra ? eager_point(comm, alpha_us, large_message) : Point{0, 0.0};
  const select::Curve rd_curve =
      intra && !oversubscribed ? rd_round_curve(comm, round_us) : select::Curve{};
  const std::vector<Point> bw = bandwidth_curve(comm, options, alpha_us, intra);
  // The cache plateau (sizes within 10% of the best) and where memory bandwidth starts (within
  // 10% of the largest size's), when the largest is clearly slower.
  double cache_gbps = 0;
  for (const auto& entry : bw) cache_gbps = std::max(cache_gbps, entry.second);
  const double gbps = bw.back().second;
  std::size_t cache_bytes = 0, dram_bytes = 0;
  for (const auto& [bytes, g] : bw)
    if (g >= 0.9 * cache_gbps) cache_bytes = bytes;
  for (const auto& [bytes, g] : bw)
    if (bytes > cache_bytes && dram_bytes == 0 && g <= 1.1 * gbps) dram_bytes = bytes;
  const char* link = intra ? "intra" : "inter";
  if (print) {
    fmt::print("# loom-perf --calibrate: {} ranks, {} link (ring schedules)\n", n, link);
    fmt::print("#   ring allreduce of 8 B: {:.1f} us = 2 x {} messages -> alpha {:.2f} us\n",
               t_small * 1e6, n - 1, alpha_us);
    for (const auto& [bytes, g] : bw)
      fmt::print("#   ring {} of {} B: {:.3f} GB/s per link\n", intra ? "allreduce" : "allgather",
                 bytes, g);
    if (intra)
      for (const Point& p : {small_eager, eager})
        fmt::print("#   ring allreduce of {} B (eager messages of {} B): {:.3f} GB/s per link\n",
                   p.first, p.first / static_cast<std::size_t>(n), p.second);
    fmt::print("#   host reduction (fp32 sum): {:.3f} GB/s\n", red);
    for (const auto& [bytes, us] : rd_curve.points)
      if (bytes > 8)
        fmt::print("#   recursive-doubling allreduce of {:.0f} B: {:.2f} us per round\n", bytes,
                   us);
    fmt::print(
        "#   recursive-doubling allreduce of 8 B: {:.2f} us per round\n# rd_round_us={:.3g}\n",
        round_us, round_us);
    std::string extra;
    if (intra && cache_gbps > 1.1 * gbps)
      extra = fmt::format(",intra_cache_gbps={:.3g},cache_bytes={},dram_bytes={}", cache_gbps,
                          cache_bytes, dram_bytes);
    if (intra)
      extra += fmt::format(",intra_eager_gbps={:.3g},intra_eager_curve=1024:{:.4g}/{}:{:.4g}",
                           eager.second, small_eager.second, large_message, eager.second);
    if (!rd_curve.empty()) extra += fmt::format(",rd_round_curve={}", rd_curve.to_string());
    // The whole curve too: the model interpolates between its points (caches fall in steps
    // that the two knees above fit badly).
    select::Curve curve;
    for (const auto& [bytes, g] : bw) curve.points.emplace_back(static_cast<double>(bytes), g);
    if (intra && !oversubscribed) extra += fmt::format(",intra_curve={}", curve.to_string());
    // A CPU's private cache, from the C library (not timed): what ranks that time-share the
    // CPUs keep cached between their turns.
    if (const long l2 = ::sysconf(_SC_LEVEL2_CACHE_SIZE); intra && l2 > 0)
      extra += fmt::format(",core_cache_bytes={}", l2);
    // More ranks than CPUs: what they move between them in total is the host's shared rate,
    // its own curve (8 ranks on 2 CPUs here: 1.37 GB/s per link at 512 KiB, 1.0-1.2 at 1-4 MiB,
    // 0.81-0.85 from 8 MiB): the largest sizes' rate, and the plateau's down to where it ends.
    if (oversubscribed) {
      select::Curve host;  // by the host's buffers: n ranks' together
      for (const auto& [bytes, g] : curve.points) host.points.emplace_back(bytes * n, g * n);
      extra += fmt::format(",oversub_gbps={:.3g},oversub_curve={}", gbps * n, host.to_string());
      if (cache_gbps > 1.1 * gbps)
        extra += fmt::format(",oversub_cache_gbps={:.3g},oversub_dram_bytes={}", cache_gbps * n,
                             dram_bytes);
    }
    fmt::print("LOOM_TUNING={0}_alpha_us={1:.3g},{0}_gbps={2:.3g},reduce_gbps={3:.3g}{4}\n", link,
               alpha_us, gbps, red, extra);
  }
  return 0;
}

}  // namespace loom::perf
