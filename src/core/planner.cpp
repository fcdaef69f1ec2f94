#include "core/planner.hpp"

#include <algorithm>
#include <optional>

#include "algorithms/factory.hpp"
#include "algorithms/plan_index.hpp"
#include "log/log.hpp"
#include "selector/plan_policy.hpp"
#include "transports/registry.hpp"

namespace loom::detail {

Result<select::Tuning> plan_tuning(const config::Config& cfg) {
  LOOM_ASSIGN_OR_RETURN(select::Tuning t, select::tuning_from(cfg));
  LOOM_ASSIGN_OR_RETURN(const transport::CostFacts shm, transport::builtin_transports().cost_facts(
                                                            transport::TransportKind::Shm, cfg));
  t.single_copy_bytes = shm.single_copy_min;
  t.shm.single_copy_min = shm.auto_single_copy_min;
  t.shm.shared_cpu_single_copy_min = shm.auto_shared_cpu_single_copy_min;
  t.shm.reuse_slots_above = shm.reuse_slots_above;
  return t;
}
namespace {

// Hosts in ring order, each host's ranks in ring order.
std::vector<std::vector<int>> hosts_in_ring_order(const std::vector<int>& ring,
                                                  const topo::Topology& t) {
  std::vector<std::vector<int>> hosts;
  std::vector<int> index(static_cast<std::size_t>(std::max(t.nhosts(), 1)), -1);
  for (int r : ring) {
    const auto h = static_cast<std::size_t>(std::max(t.host_of(r), 0));
    if (index[h] < 0) {
      index[h] = static_cast<int>(hosts.size());
      hosts.emplace_back();
    }
    hosts[static_cast<std::size_t>(index[h])].push_back(r);
  }
  return hosts;
}

// The job's shape for the cost model: ranks, hosts, the most ranks on one host, and the fewest
// CPUs of a host.
select::Shape shape_of(int nranks, const std::vector<std::vector<int>>& hosts,
                       const topo::Topology& t) {
  select::Shape s;
  s.nranks = nranks;
  s.nhosts = static_cast<int>(hosts.size());
  for (std::size_t h = 0; h < hosts.size(); ++h) {
    s.per_host = std::max(s.per_host, static_cast<int>(hosts[h].size()));
    s.uneven = s.uneven || hosts[h].size() != hosts.front().size();
    const int pus = t.hosts.size() > h ? t.hosts[h].pus : 0;
    if (pus > 0) s.cores = s.cores == 0 ? pus : std::min(s.cores, pus);
  }
  return s;
}

// The slowest host's network as the system states it (topo::HostInfo::nic_gbps, nics); every
// rank derives the same from the job's topology.
PlanSettings with_network_tuning(PlanSettings s, const topo::Topology& topology) {
  double link = 0, burst = 0;
  int links = 0;
  for (const topo::HostInfo& h : topology.hosts) {
    if (h.nic_gbps <= 0 || h.nics <= 0) continue;
    if (link > 0 && h.nic_gbps * h.nics >= link * links) continue;
    link = h.nic_gbps;
    links = h.nics;
    burst = h.nic_burst_bytes;
  }
  s.tuning = select::with_network(s.tuning, link, links, burst);
  return s;
}

}  // namespace

Planner::Planner(int rank, int nranks, std::vector<int> ring, const topo::Topology& topology,
                 PlanSettings settings)
    : rank_(rank),
      nranks_(nranks),
      ring_(std::move(ring)),
      hosts_(hosts_in_ring_order(ring_, topology)),
      shape_(shape_of(nranks, hosts_, topology)),
      settings_(with_network_tuning(std::move(settings), topology)),
      costs_(select::CostTable::build(shape_, settings_.tuning,
                                      {settings_.chunk_bytes, settings_.depth})) {}

void Planner::log_decision(const coll::OpDesc& op, const select::Decision& d, std::size_t bytes) {
  std::uint64_t size_class = 0;
  while ((std::size_t{1} << size_class) < bytes) ++size_class;
  std::uint64_t key = (static_cast<std::uint64_t>(op.kind) << 16) | (size_class << 4) |
                      static_cast<std::uint64_t>(d.algo);
  if (!logged_.insert(key).second) return;
  LOOM_LOG_INFO(Coll, "rank {}: {}", rank_, d.describe(op.kind, bytes, shape_));
}

algo::Plan Planner::make(const coll::OpDesc& op, const CollOptions& opts) {
  algo::PlanRequest r;
  r.op = op;
  r.in_place = op.in_place(rank_);
  r.rank = rank_;
  r.nranks = nranks_;
  r.ring_order = ring_;
  r.hosts = hosts_;
  r.chunk_bytes = settings_.chunk_bytes;
  r.depth = settings_.depth;
  r.min_step_part_bytes = select::ring_min_step_part_bytes(shape_);  // plans must match
  r.buffered_ring_sends = settings_.buffered_ring_sends;
  if (coll::fixed_schedule(op.kind)) return algo::make_plan(r);  // nothing to choose
  if (settings_.deterministic && op.has_redop()) {
    r.algo = coll::Algo::Deterministic;
    return algo::make_plan(r);
  }
  std::optional<coll::Algo> forced = coll::forced_by(opts.algorithm);
  if (!forced) forced = settings_.policy.for_coll(op.kind);
  const std::size_t bytes = std::max(op.send_bytes(nranks_), op.recv_bytes(nranks_));
  select::Decision d = select::choose(op.kind, bytes, costs_, forced, settings_.policy.excluded);
  log_decision(op, d, bytes);
  r.algo = d.algo;
  return algo::make_plan(r);
}

std::shared_ptr<const algo::Plan> Planner::plan(const coll::OpDesc& op, const CollOptions& opts) {
  constexpr std::size_t kMaxPlans = 32;
  // An all-to-all-v's plan depends on its counts, a send's on its peers: neither is in the key.
  if (op.kind == coll::CollKind::AllToAllV || op.kind == coll::CollKind::P2P)
    return std::make_shared<const algo::Plan>(make(op, opts));
  const PlanKey key{op.kind, op.dtype, op.root, op.in_place(rank_), op.count, opts.algorithm};
  for (std::size_t i = plans_.size(); i-- > 0;) {
    if (!(plans_[i].first == key)) continue;
    auto plan = plans_[i].second;
    auto at = plans_.begin() + static_cast<std::ptrdiff_t>(i);
    std::rotate(at, at + 1, plans_.end());  // most recent last
    return plan;
  }
  algo::Plan made = make(op, opts);
  made.index =
      std::make_shared<const algo::PlanIndex>(algo::index_plan(made));  // once, not per run
  auto plan = std::make_shared<const algo::Plan>(std::move(made));
  if (plans_.size() == kMaxPlans) plans_.erase(plans_.begin());
  plans_.emplace_back(key, plan);
  return plan;
}

}  // namespace loom::detail
