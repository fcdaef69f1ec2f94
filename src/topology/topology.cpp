// Topology helpers, assembly, validation and the topology-aware ring order (pure functions).
#include "topology/topology.hpp"

#include <algorithm>
#include <map>
#include <set>

namespace loom::topo {

int Topology::host_of(int rank) const {
  if (rank < 0 || rank >= nranks()) return -1;
  const std::string& id = ranks[static_cast<std::size_t>(rank)].host_id;
  for (std::size_t h = 0; h < hosts.size(); ++h)
    if (hosts[h].host_id == id) return static_cast<int>(h);
  return -1;
}

std::vector<int> Topology::ranks_on_host(int host) const {
  std::vector<int> out;
  if (host < 0 || host >= nhosts()) return out;
  const std::string& id = hosts[static_cast<std::size_t>(host)].host_id;
  for (const RankInfo& r : ranks)
    if (r.host_id == id) out.push_back(r.rank);
  return out;
}

bool Topology::same_host(int a, int b) const {
  if (a < 0 || b < 0 || a >= nranks() || b >= nranks()) return false;
  return ranks[static_cast<std::size_t>(a)].host_id == ranks[static_cast<std::size_t>(b)].host_id;
}

Topology assemble(std::vector<std::pair<RankInfo, HostInfo>> parts) {
  std::stable_sort(parts.begin(), parts.end(),
                   [](const auto& a, const auto& b) { return a.first.rank < b.first.rank; });
  Topology t;
  std::set<std::string, std::less<>> seen;
  for (auto& [rank, host] : parts) {
    if (seen.insert(host.host_id).second) t.hosts.push_back(std::move(host));
    t.ranks.push_back(std::move(rank));
  }
  return t;
}

Status validate(const Topology& t) {
  std::set<std::string, std::less<>> ids;
  for (std::size_t h = 0; h < t.hosts.size(); ++h) {
    const std::string& id = t.hosts[h].host_id;
    if (id.empty()) return make_error(ErrorCode::InvalidArgument, "hosts[{}].host_id: empty", h);
    if (!ids.insert(id).second)
      return make_error(ErrorCode::InvalidArgument, "hosts[{}].host_id: '{}' is listed twice", h,
                        id);
  }
  for (std::size_t r = 0; r < t.ranks.size(); ++r) {
    const RankInfo& info = t.ranks[r];
    if (info.rank != static_cast<int>(r))
      return make_error(ErrorCode::InvalidArgument, "ranks[{}].rank: is {}, expected {}", r,
                        info.rank, r);
    if (info.host_id.empty())
      return make_error(ErrorCode::InvalidArgument, "ranks[{}].host_id: empty", r);
    if (!ids.contains(info.host_id))
      return make_error(ErrorCode::InvalidArgument,
                        "ranks[{}].host_id: '{}' names no entry of hosts", r, info.host_id);
  }
  return Status::ok();
}

namespace {

// The ranks of one group (a host, or a NUMA node of a host), in order of first appearance of
// the group's key when ranks are visited in ascending order: so groups are ordered by their
// lowest rank and each group's ranks are ascending.
template <typename Key, typename KeyOf>
std::vector<std::vector<int>> group_by(const std::vector<int>& ranks, KeyOf key_of) {
  std::map<Key, std::size_t> index;
  std::vector<std::vector<int>> groups;
  for (int r : ranks) {
    auto [it, inserted] = index.try_emplace(key_of(r), groups.size());
    if (inserted) groups.emplace_back();
    groups[it->second].push_back(r);
  }
  return groups;
}

}  // namespace

std::vector<int> ring_order(const Topology& t) {
  std::vector<int> all(t.ranks.size());
  for (std::size_t r = 0; r < all.size(); ++r) all[r] = static_cast<int>(r);
  auto rank_info = [&t](int r) -> const RankInfo& { return t.ranks[static_cast<std::size_t>(r)]; };

  std::vector<int> order;
  order.reserve(all.size());
  auto hosts = group_by<std::string>(all, [&](int r) { return rank_info(r).host_id; });
  for (const std::vector<int>& host : hosts) {
    auto numa = group_by<int>(host, [&](int r) { return rank_info(r).numa_node; });
    for (const std::vector<int>& group : numa)
      order.insert(order.end(), group.begin(), group.end());
  }
  return order;
}

std::string describe_ring(const Topology& t, const std::vector<int>& order) {
  std::string out;
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (i > 0) out += t.same_host(order[i - 1], order[i]) ? " " : " | ";
    out += std::to_string(order[i]);
  }
  return out;
}

Status apply_pci_overrides(HostInfo& host, const std::vector<PciOverride>& overrides) {
  for (const PciOverride& o : overrides) {
    auto it = std::find_if(host.devices.begin(), host.devices.end(),
                           [&](const PciDevice& d) { return d.bus_id == o.bus_id; });
    if (it == host.devices.end()) {
      if (!o.kind)
        return make_error(ErrorCode::InvalidUsage,
                          "PCI device {} is not on this host as hwloc sees it; give its \"kind\" "
                          "to add it",
                          o.bus_id);
      PciDevice added;
      added.bus_id = o.bus_id;
      added.name = "added by LOOM_PCI_TOPO_FILE";
      host.devices.push_back(std::move(added));
      it = host.devices.end() - 1;
    }
    if (o.kind) it->kind = *o.kind;
    if (o.os_names) it->os_names = *o.os_names;
    if (o.pci_switch) it->pci_switch = *o.pci_switch;
    if (o.numa_node) it->numa_node = *o.numa_node;
  }
  return Status::ok();
}

}  // namespace loom::topo
