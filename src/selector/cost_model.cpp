#include "selector/cost_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <vector>

#include "algorithms/ring.hpp"

namespace loom::select {

namespace {

struct Field {
  std::string_view key;
  double Tuning::*scalar;
  double Link::*link_field;
  Link Tuning::*link;
  Curve Tuning::*curve = nullptr;
};

const std::vector<Field>& fields() {
  static const std::vector<Field> f = {
      {"intra_alpha_us", nullptr, &Link::alpha_us, &Tuning::intra},
      {"intra_gbps", nullptr, &Link::gbps, &Tuning::intra},
      {"inter_alpha_us", nullptr, &Link::alpha_us, &Tuning::inter},
      {"inter_gbps", nullptr, &Link::gbps, &Tuning::inter},
      {"nic_gbps", &Tuning::nic_gbps, nullptr, nullptr},
      {"reduce_gbps", &Tuning::reduce_gbps, nullptr, nullptr},
      {"oversub_alpha_us", &Tuning::oversub_alpha_us, nullptr, nullptr},
      {"oversub_gbps", &Tuning::oversub_gbps, nullptr, nullptr},
      {"oversub_cache_gbps", &Tuning::oversub_cache_gbps, nullptr, nullptr},
      {"oversub_dram_bytes", &Tuning::oversub_dram_bytes, nullptr, nullptr},
      {"oversub_turn_us", &Tuning::oversub_turn_us, nullptr, nullptr},
      {"intra_cache_gbps", &Tuning::intra_cache_gbps, nullptr, nullptr},
      {"intra_eager_gbps", &Tuning::intra_eager_gbps, nullptr, nullptr},
      {"cache_bytes", &Tuning::cache_bytes, nullptr, nullptr},
      {"core_cache_bytes", &Tuning::core_cache_bytes, nullptr, nullptr},
      {"dram_bytes", &Tuning::dram_bytes, nullptr, nullptr},
      {"fused_reduce", &Tuning::fused_reduce, nullptr, nullptr},
      {"rd_max_bytes", &Tuning::rd_max_bytes, nullptr, nullptr},
      {"intra_curve", nullptr, nullptr, nullptr, &Tuning::intra_curve},
      {"oversub_curve", nullptr, nullptr, nullptr, &Tuning::oversub_curve},
      {"rd_round_curve", nullptr, nullptr, nullptr, &Tuning::rd_round_curve},
      {"intra_eager_curve", nullptr, nullptr, nullptr, &Tuning::intra_eager_curve},
  };
  return f;
}

double& field_ref(Tuning& t, const Field& f) {
  return f.scalar ? t.*f.scalar : (t.*f.link).*f.link_field;
}

Result<double> parse_number(std::string_view key, std::string_view val) {
  double v = 0;
  auto [end, ec] = std::from_chars(val.data(), val.data() + val.size(), v);
  if (ec != std::errc{} || end != val.data() + val.size() || !(v >= 0) || !std::isfinite(v))
    return make_error(ErrorCode::InvalidUsage, "tuning value '{}' for {} is not a number >= 0", val,
                      key);
  return v;
}

}  // namespace

// The points around `bytes` (>= the first point's; at least two points): the last segment
// beyond the last point.
std::pair<Curve::Point, Curve::Point> Curve::segment(double bytes) const {
  auto hi = std::upper_bound(points.begin(), points.end(), bytes,
                             [](double b, const Point& p) { return b < p.first; });
  if (hi == points.end()) --hi;
  return {*(hi - 1), *hi};
}

double Curve::at(double bytes) const {
  if (points.empty()) return 0;
  if (bytes <= points.front().first) return points.front().second;
  if (bytes >= points.back().first) return points.back().second;
  const auto [lo, hi] = segment(bytes);
  const double f = std::log2(bytes / lo.first) / std::log2(hi.first / lo.first);
  return lo.second + f * (hi.second - lo.second);
}

double Curve::linear_at(double bytes) const {
  if (points.empty()) return 0;
  if (points.size() == 1 || bytes <= points.front().first) return points.front().second;
  const auto [lo, hi] = segment(bytes);
  return lo.second + (bytes - lo.first) * (hi.second - lo.second) / (hi.first - lo.first);
}

std::string Curve::to_string() const {
  std::string out;
  for (const auto& [bytes, value] : points)
    out += fmt::format("{}{:.0f}:{:.4g}", out.empty() ? "" : "/", bytes, value);
  return out;
}

Status Curve::parse(std::string_view text) {
  std::vector<std::pair<double, double>> parsed;
  while (!text.empty()) {
    const std::size_t slash = text.find('/');
    const std::string_view item = text.substr(0, slash);
    text = slash == std::string_view::npos ? std::string_view{} : text.substr(slash + 1);
    const std::size_t colon = item.find(':');
    if (colon == std::string_view::npos)
      return make_error(ErrorCode::InvalidUsage, "curve point '{}' is not bytes:value", item);
    LOOM_ASSIGN_OR_RETURN(const double bytes,
                          parse_number(fmt::format("point '{}'", item), item.substr(0, colon)));
    LOOM_ASSIGN_OR_RETURN(const double value,
                          parse_number(fmt::format("point '{}'", item), item.substr(colon + 1)));
    if (bytes <= 0 || value <= 0 || (!parsed.empty() && bytes <= parsed.back().first))
      return make_error(ErrorCode::InvalidUsage,
                        "curve point '{}': sizes must increase and values be positive", item);
    parsed.emplace_back(bytes, value);
  }
  points = std::move(parsed);
  return Status::ok();
}

Curve Curve::scaled(double factor) const {
  Curve out = *this;
  for (auto& point : out.points) point.second *= factor;
  return out;
}

std::vector<std::string_view> tuning_keys() {
  std::vector<std::string_view> keys;
  for (const Field& f : fields()) keys.push_back(f.key);
  return keys;
}

std::string Tuning::to_string() const {
  std::string out;
  Tuning copy = *this;
  for (const Field& f : fields()) {
    if (!out.empty()) out += ",";
    if (f.curve)
      out += fmt::format("{}={}", f.key, (copy.*f.curve).to_string());
    else
      out += fmt::format("{}={:.4g}", f.key, field_ref(copy, f));
  }
  return out;
}

Status Tuning::apply(std::string_view text) {
  while (!text.empty()) {
    std::size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    if (item.empty()) continue;
    std::size_t eq = item.find('=');
    if (eq == std::string_view::npos)
      return make_error(ErrorCode::InvalidUsage, "tuning entry '{}' is not key=value", item);
    std::string_view key = item.substr(0, eq), val = item.substr(eq + 1);
    auto it = std::find_if(fields().begin(), fields().end(),
                           [&](const Field& f) { return f.key == key; });
    if (it == fields().end())
      return make_error(ErrorCode::InvalidUsage, "unknown tuning key '{}' (known: {})", key,
                        Tuning{}.to_string());
    if (it->curve) {
      if (Status st = (this->*(it->curve)).parse(val); !st.is_ok())
        return make_error(ErrorCode::InvalidUsage, "{}: {}", key, st.message());
      continue;
    }
    LOOM_ASSIGN_OR_RETURN(const double v, parse_number(key, val));
    if ((key == "intra_gbps" || key == "inter_gbps" || key == "reduce_gbps") && v <= 0)
      return make_error(ErrorCode::InvalidUsage, "tuning value for {} must be positive", key);
    field_ref(*this, *it) = v;
  }
  return Status::ok();
}

bool supports(Coll c, Algo a) {
  if (a == Algo::Ring) return true;
  if (a == Algo::Tree) return c == Coll::AllReduce || c == Coll::Broadcast || c == Coll::Reduce;
  if (a == Algo::Rd) return c == Coll::AllReduce;
  return c == Coll::AllReduce || c == Coll::Reduce || c == Coll::ReduceScatter;
}

namespace {

// The ranks of an oversubscribed host's busiest CPU (3 ranks on 2 CPUs: 2).
double busiest_cpu_ranks(const Shape& s) {
  return std::ceil(static_cast<double>(s.per_host) / s.cores);
}

}  // namespace

double oversub_extra_us(const Shape& s, const Tuning& t) {
  // A message waits behind the other ranks of the busiest CPU.
  return cpu_load(s) > 1 ? t.oversub_alpha_us * (busiest_cpu_ranks(s) - 1.0) : 0;
}

int flat_tree_depth(int nranks) {
  int levels = 1;  // the in-order tree over 1..n has floor(log2 n) + 1 levels
  while ((1 << levels) <= nranks) ++levels;
  return levels - 1;
}

double cpu_load(const Shape& s) {
  return s.cores > 0 && s.per_host > s.cores ? static_cast<double>(s.per_host) / s.cores : 1.0;
}

std::size_t ring_min_step_part_bytes(const Shape& s) {
  return cpu_load(s) > 1 ? algo::kSharedCpuMinStepPartBytes : algo::kMinStepPartBytes;
}

namespace {

// Log-linear from `near` at cache_bytes to `far` at `dram` bytes (caches and prefetching make
// the fall gradual, not a cliff); `near` below, `far` above.
double cache_curve(const Tuning& t, double bytes, double near, double far, double dram) {
  if (bytes <= t.cache_bytes) return near;
  if (dram <= t.cache_bytes || bytes >= dram) return far;
  const double f = std::log2(bytes / t.cache_bytes) / std::log2(dram / t.cache_bytes);
  return near + f * (far - near);
}

// Shared-memory messages below this size go through the channel's slots (eager).
double single_copy_min(const Tuning& t, double load) {
  return t.single_copy_bytes > 0 ? t.single_copy_bytes
                                 : static_cast<double>(auto_single_copy_min(load));
}

}  // namespace

// The calibrated curve, or the cache plateau up to cache_bytes, memory bandwidth from
// dram_bytes, log-linear in between.
// On an oversubscribed host the ranks time-share the CPUs and evict each other's buffers
// between their turns: they keep the unshared cache rate (by CPU share) only while all their
// buffers fit in one CPU's cache; beyond, they share the host's own curve, oversub_cache_gbps
// falling to oversub_gbps (both calibrated with all the ranks), or their CPU share of
// intra.gbps.
double intra_link_gbps(const Shape& s, const Tuning& t, double bytes, double message,
                       double touched, bool buffered) {
  const double load = cpu_load(s);
  // Messages below the single-copy threshold are copied twice, through the channel's slots,
  // at the eager rate of their size where each rank has a CPU. On an oversubscribed host the
  // large messages' rate fits the small ones too (3-8 ranks on 2 CPUs, recursive doubling of
  // 2 KiB: -6..+18% against loom-perf with it, +22..+38% with the small messages' rate).
  const bool by_size = load <= 1 && !t.intra_eager_curve.empty();
  const double eager_gbps = by_size ? t.intra_eager_curve.at(message) : t.intra_eager_gbps;
  const bool eager =
      eager_gbps > 0 && message > 0 && (buffered || message < single_copy_min(t, load));
  const double cache_gbps = eager && t.intra_cache_gbps > 0 ? eager_gbps : t.intra_cache_gbps;
  if (load > 1) {
    // Time-shared ranks resume on whichever CPU is free, so a rank finds its buffers cached
    // only while the whole host's inputs and outputs fit in one CPU's cache; then they share
    // the cache rate by their CPU share. Measured, 3 ranks on 2 CPUs with 2 MiB L2 each: a
    // 128 KiB allreduce (768 KiB in all) at the cache rate, 512 KiB (3 MiB) at the
    // oversubscribed rate, single copy or not; 8 ranks' 64 KiB (1 MiB) near the former.
    const double core_cache = t.core_cache_bytes > 0 ? t.core_cache_bytes : t.cache_bytes / s.cores;
    const double per_rank = touched > 0 ? touched : 2 * bytes;
    if (cache_gbps > 0 && per_rank * s.per_host <= core_cache) return cache_gbps / load;
    if (t.oversub_gbps <= 0) return t.intra.gbps / load;
    // Each CPU's share of the host's rate goes to its ranks equally, and the schedule moves at
    // the pace of the busiest CPU's ranks: with P ranks on C CPUs each gets the host's rate
    // over C x ceil(P/C) (3 ranks on 2 CPUs: a quarter; measured at 8 MiB, 1.6-2.0 GB/s per
    // link where a third of the host's rate said 2.7).
    const double shares = s.cores * busiest_cpu_ranks(s);
    // The curve's axis is the host's buffers, all its ranks' together: calibrated with 8 ranks,
    // it gave 3 and 4 ranks' 8 MiB the rate of 8 ranks' 8 MiB (+21% against loom-perf), where
    // theirs move like 8 ranks' 3-4 MiB (-6..-8%).
    if (!t.oversub_curve.empty()) return t.oversub_curve.at(bytes * s.per_host) / shares;
    if (t.oversub_cache_gbps <= 0) return t.oversub_gbps / shares;
    const double dram = t.oversub_dram_bytes > 0 ? t.oversub_dram_bytes : t.dram_bytes;
    return cache_curve(t, bytes, t.oversub_cache_gbps, t.oversub_gbps, dram) / shares;
  }
  if (!t.intra_curve.empty()) {
    const double measured = t.intra_curve.at(bytes);
    return eager ? std::min(measured, eager_gbps) : measured;
  }
  if (cache_gbps <= 0) return t.intra.gbps;
  return cache_curve(t, bytes, cache_gbps, t.intra.gbps, t.dram_bytes);
}

namespace {

constexpr double kUsPerByteAtOneGBps = 1e-3;  // 1 GB/s moves 1 byte in 1e-3 us

double xfer_us(double bytes, double gbps) {
  return gbps > 0 ? bytes * kUsPerByteAtOneGBps / gbps : 0;
}

// How long a waiting rank yields its CPU before it blocks on a wake-up descriptor
// (LOOM_YIELD_US=auto; on an oversubscribed host LOOM_SPIN_US is 0).
constexpr double kYieldUs = static_cast<double>(kAutoYield.count());

// The extra time of a round in which each of a CPU's `load` ranks takes a step (recursive
// doubling's round, a tree's hop), over one rank per CPU. A rank that waits yields, and the
// scheduler gives every runnable rank of a CPU an equal share of it, yielding or not: a step of
// oversub_turn_us takes load x oversub_turn_us of wall time. The steps of a CPU's ranks follow
// one another (each waits for a message its partner sends in its own step), so a round takes
// load steps of that: load^2 turns where one rank per CPU takes one. Measured on 2 CPUs, 2 ranks
// per CPU cost 0.18-0.32 of what 4 cost beyond one rank: (4 - 1) / (16 - 1) = 0.2 here, where
// a turn per extra rank said (2 - 1) / (4 - 1) = 0.33.
// `steps`: how many of a CPU's ranks take a step in the round (all `load` of them by default).
double turns_us(const Tuning& t, double load, double steps = 0) {
  if (load <= 1) return 0;
  return t.oversub_turn_us * (load * (steps > 0 ? std::min(steps, load) : load) - 1);
}

// The effective per-stream links of a shape: the slowest link a schedule's stream crosses and
// its latency; `streams` ranks of a host share the NIC at once.
struct Links {
  double alpha_inter, alpha_intra, bw_inter, bw_intra, bw_slow, alpha_slow, red;
};

// `message`: the size of the schedule's messages (for the eager rate; see intra_link_gbps).
Links links(const Shape& s, const Tuning& t, int streams, double bytes, double message,
            double touched = 0, bool buffered = false) {
  Links l{};
  // CPU sharing on an oversubscribed host: copies share the host's bandwidth, reductions get
  // cores/per_host of a CPU each, and every message waits for its receiver to be woken.
  const double load = cpu_load(s);
  const double extra = oversub_extra_us(s, t);
  l.alpha_intra = t.intra.alpha_us + extra;
  l.alpha_inter = t.inter.alpha_us + extra;
  l.bw_intra = intra_link_gbps(s, t, bytes, message, touched, buffered);
  double nic = t.nic_gbps > 0 ? t.nic_gbps / std::max(1, streams) : t.inter.gbps;
  l.bw_inter = std::min(t.inter.gbps, nic);
  const bool multi = s.nhosts > 1;
  l.bw_slow = multi ? std::min(l.bw_inter, s.per_host > 1 ? l.bw_intra : l.bw_inter) : l.bw_intra;
  l.alpha_slow = multi ? l.alpha_inter : l.alpha_intra;
  // On one host with fused receive-reduce the reduction is part of the link's bandwidth
  // (a zero rate costs nothing in xfer_us).
  l.red = !multi && t.fused_reduce > 0 ? 0 : t.reduce_gbps / load;
  return l;
}

double ring_us(Coll c, double S, const Shape& s, const Tuning& t, const Pipeline& p) {
  const double n = s.nranks;
  const bool chain = c == Coll::Broadcast || c == Coll::Reduce;
  // With auto single copy, a ring's sends on a shared CPU go through the channel's slots
  // (Plan::buffered_sends): eager messages whatever their size.
  const bool buffered = !chain && cpu_load(s) > 1 && t.single_copy_bytes == 0;
  const double msg = std::min<double>(static_cast<double>(p.chunk_bytes), chain ? S : S / n);
  const Links l = links(s, t, 1, S, msg, 0, buffered);  // the ring enters and leaves each host once
  // A segment's path around the ring crosses hosts nhosts times per lap: the mean hop latency.
  const double H = s.nhosts > 1 ? s.nhosts : 0;
  const double alpha = (H * l.alpha_inter + (n - H) * l.alpha_intra) / n;
  const double frac = (n - 1) / n;
  const double chunk = std::min<double>(static_cast<double>(p.chunk_bytes), S);
  switch (c) {
    case Coll::AllReduce:
      return 2 * (n - 1) * alpha + xfer_us(2 * frac * S, l.bw_slow) + xfer_us(frac * S, l.red);
    case Coll::AllGather: return (n - 1) * alpha + xfer_us(frac * S, l.bw_slow);
    case Coll::ReduceScatter:
      return (n - 1) * alpha + xfer_us(frac * S, l.bw_slow) + xfer_us(frac * S, l.red);
    case Coll::Broadcast:  // a pipelined chain: fill n-1 hops, then stream
      return (n - 1) * (alpha + xfer_us(chunk, l.bw_slow)) + xfer_us(S, l.bw_slow);
    case Coll::Reduce:
      return (n - 1) * (alpha + xfer_us(chunk, l.bw_slow) + xfer_us(chunk, l.red)) +
             xfer_us(S, l.bw_slow) + xfer_us(S, l.red);
    case Coll::Barrier: break;
  }
  return 0;
}

// The latency of a tree's hops: `chain` over shared memory, `across` over the slowest link. On
// an oversubscribed host a hop waits for its receiver to be woken (the per-message rule) and,
// with a turn cost, also for its CPU's ranks to have had their turns (turns_us, as in a round of
// recursive doubling: in the double tree every rank serves both trees): the longer of the two.
// Measured on 2 CPUs: 8 ranks' 8 B tree took 58 us where the per-message rule said 30 and the
// turns 59; 3 ranks' took 6.9-8.3 us where the per-message rule says 8.3.
double tree_hop_alpha(const Shape& s, const Tuning& t, const Links& l, double chain,
                      double across) {
  const double load = cpu_load(s);
  const double woken = chain * l.alpha_intra + across * l.alpha_slow;
  if (load <= 1 || t.oversub_turn_us <= 0) return woken;
  // On one host a hop's senders are the ranks of one level of each tree: 2(n-1) sends over the
  // `across` levels, spread over the CPUs, each a step of `load` turns. Measured on 2 CPUs at 8
  // ranks, 8 B: 27-31 us, where every rank's step in every hop (recursive doubling's round)
  // said 49.
  const double steps =
      s.nhosts > 1 || s.cores <= 0 ? 0 : 2.0 * (s.nranks - 1) / (std::max(1.0, across) * s.cores);
  const double turn = turns_us(t, load, std::max(1.0, steps));
  const double slow = s.nhosts > 1 ? t.inter.alpha_us : t.intra.alpha_us;
  return std::max(woken, chain * (t.intra.alpha_us + turn) + across * (slow + turn));
}

// The data time of an allreduce whose trees carry one eager chunk each on one host whose busiest
// CPU runs three ranks or more (there the channels reuse their first slot, and the copies stay
// cached): nothing streams, the chunk crosses the levels one after another, up and down, and each
// level is a round of the busiest CPU's ranks, each copying about three quarters of a chunk
// (interior ranks take two children's, leaves one, each eager copy half a message). `full`: the
// per-chunk time with a CPU to itself. Measured on 2 CPUs, 32 KiB (16 KiB chunks), 6 calibrated
// rounds: 0.72-0.85 chunk times per level and rank of the busiest CPU at 4, 5, 7 and 8 ranks
// (6: 0.58), where the stream at the CPU share said 5-7 ranks' 32 KiB 15-40% high and 8 ranks'
// 10-17% low (its third level).
constexpr double kTreeLevelChunkShare = 0.75;

bool one_chunk_tree_levels(const Shape& s, const Tuning& t, double S, double chunk) {
  const double load = cpu_load(s);
  return s.nhosts <= 1 && load > 1 && auto_reuse_slots(busiest_cpu_ranks(s)) && S / 2 <= chunk &&
         chunk < single_copy_min(t, load);
}

double one_chunk_tree_levels_us(const Shape& s, double across, double full) {
  return 2 * across * kTreeLevelChunkShare * busiest_cpu_ranks(s) * full;
}

double tree_us(Coll c, double S, const Shape& s, const Tuning& t, const Pipeline& p) {
  const bool per_host = s.nhosts > 1 && s.per_host > 1;
  const double chunk = std::min<double>(static_cast<double>(p.chunk_bytes), S / 2);
  // A rank touches its input, its output and, interior in one of the trees, its two children's
  // partial sums in scratch (S in all when each tree's half is one chunk): 3 S against a CPU's
  // cache on an oversubscribed host (8 ranks on 2 CPUs, 128 KiB: 229-259 us measured, where 2 S
  // kept the cache rate and said 183).
  const Links l = links(s, t, per_host ? 2 : s.per_host, S, chunk, 3 * S);  // the NIC: leaders
  const double chain = per_host ? s.per_host - 1 : 0;
  double across = per_host ? flat_tree_depth(s.nhosts) : flat_tree_depth(s.nranks);
  if (s.tree_depth > 0) across = std::max(1.0, s.tree_depth - chain);
  const double hop_alpha = tree_hop_alpha(s, t, l, chain, across);
  const double hops = chain + across;
  const double bw = per_host ? std::min(l.bw_inter, l.bw_intra) : l.bw_slow;
  // Store-and-forward of the first chunk: chain hops over shared memory, tree hops over the
  // slowest link the trees use. While the pipeline fills, few ranks run: on an oversubscribed
  // host each of them has a CPU to itself (the rates by CPU share apply once all are busy).
  const double load = s.nhosts > 1 ? 1.0 : cpu_load(s);
  double fill = chain * xfer_us(chunk, l.bw_intra * load) + across * xfer_us(chunk, bw * load);
  // An eager chunk's send completes at once: its sender goes on to serve the other tree while
  // the chunk waits for its receiver, and half the fill overlaps the stream. Measured on 2 CPUs
  // (32 KiB, 16 KiB chunks): 4-8 ranks' data time was their stream plus 2.6-6.6 us, where the
  // whole fill said 7.8-11.7. Single-copy sends wait for their receiver: the whole fill.
  if (load > 1 && chunk < single_copy_min(t, load)) fill /= 2;
  const double hop_red = xfer_us(chunk, l.red * load) * hops;
  // Throughput: an interior rank moves 2S each way (1.5S for the re-rooted broadcast/reduce).
  // Per host, the two leaders' traffic (2S together) shares the host's NIC, and each chain rank
  // moves 2S over shared memory. On an oversubscribed host the CPUs bound it, not the busiest
  // rank: they run every rank's copies, 2(n-1)S in all as for the ring (measured, 8 ranks on 2
  // CPUs: the tree 10-30% faster than the ring from 1 MiB on, where 2S per rank said slower).
  const double allreduce_bytes = load > 1 ? 2.0 * (s.nranks - 1) / s.nranks * S : 2 * S;
  const double host_bw = t.nic_gbps > 0 ? std::min(t.nic_gbps, 2 * t.inter.gbps) : 2 * t.inter.gbps;
  auto stream = [&](double bytes) {
    return per_host ? std::max(xfer_us(bytes, host_bw), xfer_us(bytes, l.bw_intra))
                    : xfer_us(bytes, bw);
  };
  switch (c) {
    case Coll::AllReduce:  // up and down; reduces S
      if (one_chunk_tree_levels(s, t, S, chunk))
        return 2 * hop_alpha + one_chunk_tree_levels_us(s, across, xfer_us(chunk, bw * load)) +
               hop_red + xfer_us(S, l.red);
      return 2 * hop_alpha + 2 * fill + hop_red + stream(allreduce_bytes) + xfer_us(S, l.red);
    case Coll::Broadcast: return hop_alpha + fill + stream(1.5 * S);
    case Coll::Reduce: return hop_alpha + fill + hop_red + stream(1.5 * S) + xfer_us(S, l.red);
    default: return 1e30;
  }
}

// Recursive doubling allreduce: log2(p) rounds (p the largest power of two <= n), each one
// message of the whole buffer each way over the slowest link and a reduction of it (fused into
// the receive on one host for the lower rank of each pair only: counted in full); ranks beyond p
// fold into a partner first and get the result back at the end. Above rd_max_bytes it is not a
// candidate.
//
// The ranks that take part in the rounds: on one host the n - p folded ranks wait for their
// result meanwhile, so after a while p ranks share the CPUs, not n. Across hosts the folded
// ranks are the last hosts' and the busiest host keeps all its ranks.
// The ranks active in recursive doubling's rounds: p of them, spread evenly over the CPUs (each
// folded rank is its neighbour's partner, and neighbours share a CPU when bound in blocks).
Shape rd_round_shape(const Shape& s, int pow2) {
  Shape active = s;
  if (s.nhosts <= 1) active.nranks = active.per_host = pow2;
  return active;
}

// The latency of one round of recursive doubling: its message, plus the reduction of what
// arrived, a step of its own on the receiver (the buffer lands in scratch first; measured at 2
// ranks here: 1.45 us per round where the ring's fused steps took 1.01 us each). Every rank of a
// host sends and receives in every round: on an oversubscribed host each CPU runs its ranks in
// turn (turns_us) instead of one wake-up per message (with oversub_turn_us=0: the per-message
// rule).
double rd_round_alpha(const Shape& s, const Tuning& t, const Links& l) {
  const double load = cpu_load(s);
  if (load <= 1 || t.oversub_turn_us <= 0) return l.alpha_slow + t.intra.alpha_us;
  const double message = s.nhosts > 1 ? t.inter.alpha_us : t.intra.alpha_us;
  return message + t.intra.alpha_us + turns_us(t, load);
}

// The fold's two messages (into the partner, and the result back). Each needs the folded ranks
// to run: on an oversubscribed host with a turn cost, the CPUs run the host's n - p folded ranks
// one after another (spread over the cores), each step taking load x oversub_turn_us as in
// turns_us, instead of a wake-up per message.
// A fold crosses hosts only when they hold one rank each: neighbours share a host otherwise.
bool fold_crosses_hosts(const Shape& s) {
  return s.nhosts > 1 && s.per_host < 2;
}

double rd_fold_alpha(const Shape& s, const Tuning& t, const Links& l, int extras) {
  const bool across = fold_crosses_hosts(s);
  const double load = cpu_load(s);
  if (load <= 1 || t.oversub_turn_us <= 0) return across ? l.alpha_slow : l.alpha_intra;
  const double message = across ? t.inter.alpha_us : t.intra.alpha_us;
  const int on_host = s.nhosts > 1 ? std::min(extras, s.per_host) : extras;
  return message + t.oversub_turn_us * load * on_host / s.cores;
}

double rd_us(Coll c, double S, const Shape& s, const Tuning& t) {
  if (c != Coll::AllReduce || S > t.rd_max_bytes) return 1e30;
  const auto n = static_cast<unsigned>(std::max(1, s.nranks));
  const int pow2 = static_cast<int>(std::bit_floor(n));
  const int rounds = std::bit_width(n) - 1;
  const Shape active = rd_round_shape(s, pow2);
  // Each rank touches its input, its output and a scratch buffer per round.
  const double touched = (2 + rounds) * S;
  const Links l = links(active, t, active.per_host, S, S, touched);  // every rank talks at once
  // The reduction of what arrived, on the CPU share of the ranks reducing in the round (as the
  // ring's; measured at 8 ranks on 2 CPUs, 8-16 KiB: 20-28 us more per doubling where the
  // unshared rate said 14).
  const double red = xfer_us(S, t.reduce_gbps / cpu_load(active));
  // Where each rank has a CPU, a round as calibrated on this host (Tuning::rd_round_curve).
  const bool calibrated = s.nhosts <= 1 && cpu_load(s) <= 1 && !t.rd_round_curve.empty();
  const double round = calibrated ? t.rd_round_curve.linear_at(S)
                                  : rd_round_alpha(active, t, l) + xfer_us(S, l.bw_slow) + red;
  if (pow2 == s.nranks) return rounds * round;
  const Links lf = links(s, t, s.per_host, S, S, touched);  // the folded ranks' messages
  const double fold_alpha = rd_fold_alpha(s, t, lf, s.nranks - pow2);
  const double fold_gbps = fold_crosses_hosts(s) ? lf.bw_slow : lf.bw_intra;
  const double fold = 2 * (fold_alpha + xfer_us(S, fold_gbps)) + red;
  // A folded rank waits for its result as every waiting rank does: it yields the CPU for
  // kYieldUs before it blocks, and yielding it still gets its share of the CPU. On an
  // oversubscribed host the rounds take all n ranks' turns for their first kYieldUs, the p
  // ranks' after (7 ranks on 2 CPUs measured 28-52 us at 8 B, nearly 8 ranks' 31-52).
  double all_rounds = rounds * round;
  double woken = 0;
  if (s.nhosts <= 1 && cpu_load(s) > 1 && t.oversub_turn_us > 0) {
    const double crowded = rd_round_alpha(s, t, l) + xfer_us(S, l.bw_slow) + red;
    all_rounds = rounds * crowded <= kYieldUs ? rounds * crowded
                                              : kYieldUs + (rounds - kYieldUs / crowded) * round;
    // A folded rank waits from its fold message's arrival to its result's: past the yield
    // phase it has blocked, and the result waits for it to be woken and scheduled, the
    // oversubscribed receiver's wake-up (oversub_alpha_us), less what the sender spends copying
    // the result meanwhile (the receiver is woken at its first slot). Measured on 2 CPUs: 7
    // ranks (3 folded, the rounds take 17-24 us) at 8 B-2 KiB 30-69 us where the turns alone
    // said 25-37; 5 and 6 ranks, whose folded ranks wait less than 20 us at 8 B, match the
    // turns, and 6 ranks at 32 KiB (a 12 us copy) pay no wake-up.
    if (fold_alpha + all_rounds > kYieldUs)
      woken = std::max(0.0, t.oversub_alpha_us - xfer_us(S, lf.bw_slow));
  }
  return all_rounds + fold + woken;
}

// Deterministic reduce-scatter: every rank receives its slice from all n-1 others at once (as
// many messages as a ring, all independent), reduces them in rank order; then a ring allgather
// (allreduce) or a gather to the root (reduce). Across hosts each host's NIC carries
// per_host x (n - per_host) / n x S instead of the ring's (n - 1) / n x S.
double deterministic_us(Coll c, double S, const Shape& s, const Tuning& t, const Pipeline& p) {
  const double n = s.nranks;
  const Links l = links(s, t, 1, S, S / n);
  const double frac = (n - 1) / n;
  double rs = (n - 1) * l.alpha_slow / 2 + l.alpha_slow + xfer_us(frac * S, l.bw_intra) +
              xfer_us(frac * S, l.red);
  if (s.nhosts > 1) {
    const double nic = t.nic_gbps > 0 ? t.nic_gbps : t.inter.gbps;
    const double P = s.per_host;
    rs = std::max(rs, (n - 1) * l.alpha_slow / 2 + xfer_us(P * (n - P) / n * S, nic) +
                          xfer_us(frac * S, l.red));
  }
  switch (c) {
    case Coll::ReduceScatter: return rs;
    case Coll::AllReduce: return rs + ring_us(Coll::AllGather, S, s, t, p);
    case Coll::Reduce: return rs + l.alpha_slow + xfer_us(frac * S, l.bw_slow);
    default: return 1e30;
  }
}

double schedule_us(Coll c, Algo a, double S, const Shape& s, const Tuning& t, const Pipeline& p) {
  switch (a) {
    case Algo::Ring: return ring_us(c, S, s, t, p);
    case Algo::Tree: return tree_us(c, S, s, t, p);
    case Algo::Deterministic: return deterministic_us(c, S, s, t, p);
    case Algo::Rd: return rd_us(c, S, s, t);
  }
  return 1e30;
}

}  // namespace

double predict_us(Coll c, Algo a, std::size_t bytes, const Shape& s, const Tuning& t,
                  const Pipeline& p) {
  if (s.nranks <= 1) return xfer_us(static_cast<double>(bytes), t.intra.gbps * 4);
  const double S = static_cast<double>(bytes);
  // On an oversubscribed host the waits for descheduled ranks (oversub_alpha_us, the turns)
  // add to the copies instead of overlapping them: the CPUs are never idle there (a rank with
  // nothing to do yields to the others), so a wait is the other ranks' CPU time, which their
  // copies need too. The calibration counts them that way as well (oversub_gbps is measured
  // net of the calibrated per-message latency).
  return schedule_us(c, a, S, s, t, p);
}

}  // namespace loom::select
