#include "topology/nic_choice.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace loom::topo {
namespace {

const PciDevice* find_gpu(const HostInfo& host, std::string_view bus_id) {
  if (bus_id.empty()) return nullptr;
  for (const PciDevice& d : host.devices)
    if (d.kind == "gpu" && d.bus_id == bus_id) return &d;
  return nullptr;
}

// "rdmap16s27-rdm" names the device "rdmap16s27"; "eth0" names "eth0".
bool names_device(std::string_view name, std::string_view os_name) {
  if (os_name.empty() || name.substr(0, os_name.size()) != os_name) return false;
  return name.size() == os_name.size() || name[os_name.size()] == '-';
}

// What the rank computes with, for the logs.
std::string anchor_text(const RankInfo& rank, const PciDevice* gpu) {
  if (gpu != nullptr) return fmt::format("GPU {}", gpu->bus_id);
  return fmt::format("CPUs {} (NUMA node {})", format_cpu_list(rank.cpus), rank.numa_node);
}

}  // namespace

std::string_view to_string(NicPlace p) {
  switch (p) {
    case NicPlace::SameSwitch: return "same PCI switch";
    case NicPlace::SameNuma: return "same NUMA node";
    case NicPlace::Far: return "another NUMA node";
    case NicPlace::Unknown: break;
  }
  return "unknown place";
}

const PciDevice* find_nic(const HostInfo& host, std::string_view name) {
  for (const PciDevice& d : host.devices) {
    if (d.kind != "nic") continue;
    for (const std::string& os : d.os_names)
      if (names_device(name, os)) return &d;
  }
  return nullptr;
}

NicPlace place_of_nic(const HostInfo& host, const RankInfo& rank, std::string_view gpu_bus_id,
                      std::string_view name) {
  const PciDevice* nic = find_nic(host, name);
  if (nic == nullptr) return NicPlace::Unknown;
  const PciDevice* gpu = find_gpu(host, gpu_bus_id);
  if (gpu != nullptr && !gpu->pci_switch.empty() && gpu->pci_switch == nic->pci_switch)
    return NicPlace::SameSwitch;
  const int numa = gpu != nullptr ? gpu->numa_node : rank.numa_node;
  if (numa < 0 || nic->numa_node < 0) return NicPlace::Unknown;
  return numa == nic->numa_node ? NicPlace::SameNuma : NicPlace::Far;
}

NicChoice nearest_nics(const HostInfo& host, const RankInfo& rank, std::string_view gpu_bus_id,
                       const std::vector<std::string>& candidates) {
  std::vector<NicPlace> places;
  places.reserve(candidates.size());
  for (const std::string& c : candidates) places.push_back(place_of_nic(host, rank, gpu_bus_id, c));
  const NicPlace best =
      places.empty() ? NicPlace::Unknown : *std::min_element(places.begin(), places.end());
  const std::string anchor = anchor_text(rank, find_gpu(host, gpu_bus_id));
  NicChoice out;
  if (best >= NicPlace::Far) {
    out.names = candidates;
    out.why = fmt::format("none is nearer to {} than another (all {})", anchor, candidates.size());
    return out;
  }
  for (std::size_t i = 0; i < candidates.size(); ++i)
    if (places[i] == best) out.names.push_back(candidates[i]);
  out.why = fmt::format("{} of {}: {} as {}", out.names.size(), candidates.size(), to_string(best),
                        anchor);
  return out;
}

NicChoice nearest_nics(const Topology& job, int rank, std::string_view gpu_bus_id,
                       const std::vector<std::string>& candidates) {
  const int host = job.host_of(rank);
  if (host < 0) return {candidates, "this rank's host is unknown"};
  return nearest_nics(job.hosts[static_cast<std::size_t>(host)],
                      job.ranks[static_cast<std::size_t>(rank)], gpu_bus_id, candidates);
}

}  // namespace loom::topo
