#include "selector/model.hpp"

#include <algorithm>
#include <bit>

#include "selector/catalog.hpp"
#include "selector/plan_policy.hpp"
#include "selector/shared_cpu.hpp"

namespace loom::select {
namespace {

// The links a schedule's streams use: latencies (wake-ups included), the intra-host, network and
// slowest bandwidth, and the reduction rate (0: fused into the receive).
struct Links {
  double alpha_inter, alpha_intra, alpha_slow, bw_inter, bw_intra, bw_slow, red;
};

// `streams`: the host's ranks that use its NIC at once; `message`, `touched`, `path`: see
// intra_link_gbps.
Links links(const Shape& s, const Tuning& t, int streams, double bytes, double message,
            double touched, Path path) {
  Links l{};
  const double wakeup = shared_cpu::wakeup_us(s, t);
  l.alpha_intra = t.intra.alpha_us + wakeup;
  l.alpha_inter = t.inter.alpha_us + wakeup;
  l.bw_intra = intra_link_gbps(s, t, bytes, message, touched, path);
  const double nic = t.nic_gbps > 0 ? t.nic_gbps / std::max(1, streams) : t.inter.gbps;
  l.bw_inter = std::min(t.inter.gbps, nic);
  const bool multi = s.nhosts > 1;
  l.bw_slow = multi ? std::min(l.bw_inter, s.per_host > 1 ? l.bw_intra : l.bw_inter) : l.bw_intra;
  l.alpha_slow = multi ? l.alpha_inter : l.alpha_intra;
  // On one host shared memory's fused receive-reduce makes the reduction part of the link's rate.
  l.red = !multi && t.fused_reduce > 0 ? 0 : t.reduce_gbps / cpu_load(s);
  return l;
}

double ring_us(Coll c, double S, const Shape& s, const Tuning& t, const Pipeline& p, Path path) {
  const double n = s.nranks;
  const bool chain = c == Coll::Broadcast || c == Coll::Reduce;
  const double msg = std::min<double>(static_cast<double>(p.chunk_bytes), chain ? S : S / n);
  const Links l = links(s, t, 1, S, msg, 0, path);  // the ring enters and leaves a host once
  // A segment's lap crosses hosts nhosts times: the mean hop latency.
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
    default: break;  // barrier; the exchanges have one plan, never chosen by cost
  }
  return kNever;
}

// Double binary trees: flat, or per host a chain below trees of the hosts' leaders. Latency:
// the hops up (and down); fill: the first chunk's store-and-forward; then the stream.
double tree_us(Coll c, double S, const Shape& s, const Tuning& t, const Pipeline& p, Path path) {
  const bool per_host = s.nhosts > 1 && s.per_host > 1;
  const double chunk = std::min<double>(static_cast<double>(p.chunk_bytes), S / 2);
  // An interior rank touches its input, its output and its children's partial sums: 3 S.
  const Links l = links(s, t, per_host ? 2 : s.per_host, S, chunk, 3 * S, path);
  const double chain = per_host ? s.per_host - 1 : 0;
  double across = per_host ? flat_tree_depth(s.nhosts) : flat_tree_depth(s.nranks);
  if (s.tree_depth > 0) across = std::max(1.0, s.tree_depth - chain);
  const double hop_alpha =
      shared_cpu::tree_hop_us(s, t, chain, across, chain * l.alpha_intra + across * l.alpha_slow);
  const double bw = per_host ? std::min(l.bw_inter, l.bw_intra) : l.bw_slow;
  // While the pipeline fills few ranks run: on shared CPUs each has one to itself. An eager
  // chunk's sender serves the other tree while the chunk waits: half the fill overlaps.
  const double load = s.nhosts > 1 ? 1.0 : cpu_load(s);
  // Across hosts a chunk's hop has its link to itself while the pipeline fills.
  const double fill_bw = per_host ? std::min(t.inter.gbps, l.bw_intra) : bw;
  double fill = chain * xfer_us(chunk, l.bw_intra * load) + across * xfer_us(chunk, fill_bw * load);
  if (load > 1 && path == Path::Eager) fill /= 2;
  const double hop_red = xfer_us(chunk, l.red * load) * (chain + across);
  // An interior rank moves 2 S each way (1.5 S for the re-rooted broadcast and reduce); on
  // shared CPUs, which run every rank's copies, 2 (n - 1) S in all as for the ring.
  const double allreduce_bytes = load > 1 ? 2.0 * (s.nranks - 1) / s.nranks * S : 2 * S;
  // Per host, the two leaders' streams share the NIC; each chain rank moves 2 S.
  const double host_bw = t.nic_gbps > 0 ? std::min(t.nic_gbps, 2 * t.inter.gbps) : 2 * t.inter.gbps;
  // Per host the NICs stream while the chunks fill the trees: the longer of the two.
  auto pipelined = [&](double fill_us, double stream_us) {
    return per_host ? std::max(fill_us, stream_us) : fill_us + stream_us;
  };
  auto stream = [&](double bytes) {
    return per_host ? std::max(xfer_us(bytes, host_bw), xfer_us(bytes, l.bw_intra))
                    : xfer_us(bytes, bw);
  };
  switch (c) {
    case Coll::AllReduce:  // up and down; reduces S
      if (shared_cpu::tree_levels_in_rounds(s, t, path == Path::Eager, S, chunk))
        return 2 * hop_alpha + shared_cpu::tree_rounds_us(s, across, xfer_us(chunk, bw * load)) +
               hop_red + xfer_us(S, l.red);
      return 2 * hop_alpha + pipelined(2 * fill, stream(allreduce_bytes)) + hop_red +
             xfer_us(S, l.red);
    case Coll::Broadcast: return hop_alpha + pipelined(fill, stream(1.5 * S));
    case Coll::Reduce:
      return hop_alpha + pipelined(fill, stream(1.5 * S)) + hop_red + xfer_us(S, l.red);
    default: return kNever;
  }
}

// A fold crosses hosts only when they hold one rank each: neighbours share a host otherwise.
bool fold_crosses_hosts(const Shape& s) {
  return s.nhosts > 1 && s.per_host < 2;
}

// Recursive doubling allreduce: log2(p) rounds (p the largest power of two <= n), each a message
// of the whole buffer each way, its latency, the reduction step on arrival and the reduction;
// ranks beyond p fold into a partner first and get the result back at the end.
double rd_us(double S, const Shape& s, const Tuning& t, Path path) {
  const auto n = static_cast<unsigned>(std::max(1, s.nranks));
  const int pow2 = static_cast<int>(std::bit_floor(n));
  const int rounds = std::bit_width(n) - 1;
  const Shape active = shared_cpu::rd_round_shape(s, pow2);
  const double touched = (2 + rounds) * S;  // input, output and a scratch buffer per round
  const Links l = links(active, t, active.per_host, S, S, touched, path);  // all talk at once
  // The reduction: fused into the receive on one host, as for the ring and the tree (links()).
  const double red = xfer_us(S, l.red);
  const double data_us = xfer_us(S, l.bw_slow) + red;
  double round = 0;
  if (s.nhosts <= 1 && cpu_load(s) <= 1 && !t.rd_round_curve.empty()) {
    round = t.rd_round_curve.linear_at(S);  // as calibrated on this host
  } else {
    const double turns = shared_cpu::rd_round_us(active, t);
    round = (turns >= 0 ? turns : l.alpha_slow + t.intra.alpha_us) + data_us;
  }
  if (pow2 == s.nranks) return rounds * round;
  const Links lf = links(s, t, s.per_host, S, S, touched, path);  // the folded ranks' messages
  const bool across = fold_crosses_hosts(s);
  double fold_alpha = shared_cpu::rd_fold_us(s, t, across, s.nranks - pow2);
  if (fold_alpha < 0) fold_alpha = across ? lf.alpha_slow : lf.alpha_intra;
  const double fold = 2 * (fold_alpha + xfer_us(S, across ? lf.bw_slow : lf.bw_intra)) + red;
  const double all_rounds = shared_cpu::rd_rounds_us(s, t, rounds, round, data_us);
  const double woken =
      shared_cpu::rd_result_wakeup_us(s, t, fold_alpha + all_rounds, xfer_us(S, lf.bw_slow));
  return all_rounds + fold + woken;
}

// Deterministic mode: every rank receives its slice from all others at once and reduces them in
// rank order, then a ring allgather (allreduce) or a gather to the root (reduce). Across hosts a
// host's NIC carries per_host x (n - per_host) / n x S.
double deterministic_us(Coll c, double S, const Shape& s, const Tuning& t, const Pipeline& p,
                        Path path) {
  const double n = s.nranks;
  const Links l = links(s, t, 1, S, S / n, 0, path);
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
    case Coll::AllReduce: return rs + ring_us(Coll::AllGather, S, s, t, p, path);
    case Coll::Reduce: return rs + l.alpha_slow + xfer_us(frac * S, l.bw_slow);
    default: return kNever;
  }
}

// Hierarchical allreduce: a ring reduce-scatter and allgather inside each host around a ring
// allreduce of each local rank's shard across the hosts, a host's local ranks streaming through
// its NICs at once.
double hier_us(Coll c, double S, const Shape& s, const Tuning& t, Path path) {
  const double L = s.per_host, H = s.nhosts;
  const Links l = links(s, t, s.per_host, S, S / s.nranks, 0, path);
  const double local_frac = (L - 1) / L;
  const double local = (L - 1) * l.alpha_intra + xfer_us(local_frac * S, l.bw_intra);
  // Allgather and reduce-scatter: each rank's block crosses to the H - 1 other hosts in a ring
  // of its counterparts, and the columns go round the host once.
  const double block = S / s.nranks;
  const double ring_across = (H - 1) * l.alpha_inter + xfer_us((H - 1) * block, l.bw_inter);
  if (c == Coll::AllGather) return ring_across + local;
  if (c == Coll::ReduceScatter)
    return local + xfer_us(local_frac * S, l.red) + ring_across + xfer_us((H - 1) * block, l.red);
  if (c != Coll::AllReduce) return kNever;
  const double shard = S / L;
  const double across = 2 * (H - 1) * l.alpha_inter + xfer_us(2 * (H - 1) / H * shard, l.bw_inter) +
                        xfer_us((H - 1) / H * shard, l.red);
  return 2 * local + xfer_us(local_frac * S, l.red) + across;
}

// Bruck's allgather and reduce-scatter: ceil(log2 n) dependent rounds; round k moves
// c = min(2^k, n - 2^k) blocks of S / n to the rank 2^k positions away. Across hosts (ranks
// numbered host by host) a round ends when the host whose ranks send most across hosts has
// pushed them through its NIC, and every rank's message at one stream's rate.
double bruck_us(Coll c, double S, const Shape& s, const Tuning& t, Path path) {
  if (c != Coll::AllGather && c != Coll::ReduceScatter) return kNever;
  const int n = s.nranks;
  const double block = S / n;
  const Links l = links(s, t, 1, S, S / 2, 0, path);
  const bool multi = s.nhosts > 1;
  const double nic = t.nic_gbps > 0 ? t.nic_gbps : t.inter.gbps;
  const int P = std::max(1, s.per_host);
  double us = 0;
  for (int k = 0; (1 << k) < n; ++k) {
    const double moved = std::min(1 << k, n - (1 << k)) * block;
    double data = xfer_us(moved, multi ? l.bw_inter : l.bw_intra);
    if (multi) {  // the ranks of host 0 whose partner 2^k positions back is on another host
      int crossing = 0;
      for (int j = 0; j < P; ++j) crossing += ((j - (1 << k)) % n + n) % n / P != 0 ? 1 : 0;
      data = std::max({data, xfer_us(crossing * moved, nic), xfer_us(moved, l.bw_intra)});
    }
    us += (multi ? l.alpha_inter : l.alpha_intra) + data;
    if (c == Coll::ReduceScatter) us += xfer_us(moved, l.red);
  }
  return us;
}

}  // namespace

namespace cost {

double ring(Coll c, Path path, double S, const Shape& s, const Tuning& t, const Pipeline& p) {
  return ring_us(c, S, s, t, p, path);
}
double tree(Coll c, Path path, double S, const Shape& s, const Tuning& t, const Pipeline& p) {
  return tree_us(c, S, s, t, p, path);
}
double rd(Coll c, Path path, double S, const Shape& s, const Tuning& t, const Pipeline&) {
  return c == Coll::AllReduce ? rd_us(S, s, t, path) : kNever;
}
double deterministic(Coll c, Path path, double S, const Shape& s, const Tuning& t,
                     const Pipeline& p) {
  return deterministic_us(c, S, s, t, p, path);
}
double hier(Coll c, Path path, double S, const Shape& s, const Tuning& t, const Pipeline&) {
  return hier_us(c, S, s, t, path);
}
double bruck(Coll c, Path path, double S, const Shape& s, const Tuning& t, const Pipeline&) {
  return bruck_us(c, S, s, t, path);
}

}  // namespace cost

double single_copy_min(const Shape& s, const Tuning& t) {
  if (t.single_copy_bytes > 0) return t.single_copy_bytes;
  return cpu_load(s) > 1 ? t.shm.shared_cpu_single_copy_min : t.shm.single_copy_min;
}

double eager_below(Coll c, Algo a, const Shape& s, const Tuning& t, const Pipeline& p) {
  const bool chain = c == Coll::Broadcast || c == Coll::Reduce;
  if (a == Algo::Ring && !chain && shared_cpu::ring_sends_eager(s, t)) return kNever;
  const double threshold = single_copy_min(s, t);
  // A ring's or tree's messages never exceed a chunk.
  const bool chunked = a == Algo::Ring || a == Algo::Tree;
  if (chunked && static_cast<double>(p.chunk_bytes) < threshold) return kNever;
  return std::min(kNever, threshold * row(a).message_divisor(c, s));
}

double intra_link_gbps(const Shape& s, const Tuning& t, double bytes, double message,
                       double touched, Path path) {
  const double load = cpu_load(s);
  const HostRates& h = t.host;
  // Eager messages move at their size's rate where each rank has a CPU, at the flat rate on
  // shared CPUs.
  const double eager_gbps =
      load <= 1 && !h.eager_curve.empty() ? h.eager_curve.at(message) : h.eager_gbps;
  const bool eager = path == Path::Eager && eager_gbps > 0;
  const double cache_gbps = eager && h.cache_gbps > 0 ? eager_gbps : h.cache_gbps;
  if (load > 1) return shared_cpu::link_gbps(s, t, bytes, cache_gbps, touched);
  if (!h.curve.empty()) {
    const double measured = h.curve.at(bytes);
    return eager ? std::min(measured, eager_gbps) : measured;
  }
  if (cache_gbps <= 0) return t.intra.gbps;
  return h.fall(bytes, cache_gbps, t.intra.gbps, h.dram_bytes);
}

namespace {

// A token bucket on the NICs (tc tbf): a call whose bytes B through a host's NIC fit in the bucket
// leaves at the line rate, and the bucket refills at the capped rate R meanwhile. A call of the
// whole bucket takes at least B / R, one of a small share of it its time at the line rate: the
// longer of that time and B / R x B / bucket, instead of its latencies plus B / R. B / R comes
// from the two evaluations: the cap adds B (1/R - 1/line).
double with_burst(double capped_us, Coll c, Algo a, Path path, double bytes, const Shape& s,
                  const Tuning& t, const Pipeline& p) {
  if (t.nic_burst_bytes <= 0 || s.nhosts < 2 || t.line_gbps <= t.inter.gbps) return capped_us;
  Tuning line = t;
  line.inter.gbps = t.line_gbps;
  const double ratio = t.inter.gbps / t.line_gbps;  // R / line
  if (t.nic_gbps > 0) line.nic_gbps = t.nic_gbps / ratio;
  const double line_us = row(a).cost(c, path, bytes, s, line, p);
  const double nic_us = std::max(0.0, capped_us - line_us) / (1 - ratio);  // B / R
  const double host_gbps = t.nic_gbps > 0 ? t.nic_gbps : t.inter.gbps;
  const double share = nic_us * host_gbps * 1e3 / t.nic_burst_bytes;  // B / bucket
  if (share > 1) return capped_us;
  return std::max(line_us, nic_us * share);
}

}  // namespace

double model_us(Coll c, Algo a, Path path, double bytes, const Shape& s, const Tuning& t,
                const Pipeline& p) {
  if (!supports(c, a)) return kNever;
  if (s.nranks <= 1) return xfer_us(bytes, t.intra.gbps * 4);
  const double us = row(a).cost(c, path, bytes, s, t, p);
  return with_burst(us, c, a, path, bytes, s, t, p);
}

double predict_us(Coll c, Algo a, std::size_t bytes, const Shape& s, const Tuning& t,
                  const Pipeline& p) {
  const auto S = static_cast<double>(bytes);
  if (S > row(a).max_bytes(t)) return kNever;
  const Path path = S < eager_below(c, a, s, t, p) ? Path::Eager : Path::Direct;
  return model_us(c, a, path, S, s, t, p);
}

}  // namespace loom::select
