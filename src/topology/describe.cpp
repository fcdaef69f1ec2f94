// Human-readable reports of the local topology (loom-info --topology, logs).
#include <fmt/format.h>

#include <algorithm>

#include "topology/topology.hpp"

namespace loom::topo {
namespace {

std::string count_or_unknown(int n) {
  return n > 0 ? std::to_string(n) : "unknown";
}

std::string numa_or_dash(int node) {
  return node >= 0 ? std::to_string(node) : "-";
}

std::string link_or_dash(double gbps) {
  return gbps > 0 ? fmt::format("{:.2f} GB/s", gbps) : "-";
}

std::string device_table(const std::vector<PciDevice>& devices) {
  std::size_t kind_w = 4;
  std::size_t bus_w = 6;
  std::size_t link_w = 4;
  std::size_t switch_w = 6;
  for (const PciDevice& d : devices) {
    kind_w = std::max(kind_w, d.kind.size());
    bus_w = std::max(bus_w, d.bus_id.size());
    switch_w = std::max(switch_w, d.pci_switch.size());
    link_w = std::max(link_w, link_or_dash(d.link_gbps).size());
  }
  constexpr std::size_t kGap = 2;
  auto row = [&](std::string_view kind, std::string_view bus, std::string_view numa,
                 std::string_view link, std::string_view pci_switch, std::string_view name) {
    return fmt::format("  {:<{}}{:<{}}{:<{}}{:<{}}{:<{}}{}\n", kind, kind_w + kGap, bus,
                       bus_w + kGap, numa, 4 + kGap, link, link_w + kGap, pci_switch,
                       switch_w + kGap, name);
  };
  std::string out = row("KIND", "BUS ID", "NUMA", "LINK", "SWITCH", "NAME");
  for (const PciDevice& d : devices)
    out += row(d.kind, d.bus_id, numa_or_dash(d.numa_node), link_or_dash(d.link_gbps),
               d.pci_switch.empty() ? "-" : d.pci_switch, d.name);
  return out;
}

}  // namespace

std::string format_cpu_list(const std::vector<int>& cpus) {
  if (cpus.empty()) return "-";
  std::string out;
  std::size_t i = 0;
  while (i < cpus.size()) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? std::to_string(cpus[i]) : fmt::format("{}-{}", cpus[i], cpus[j]);
    i = j + 1;
  }
  return out;
}

std::string describe_local(const RankInfo& rank, const HostInfo& host) {
  std::string out;
  out += fmt::format("host id:     {}\n", host.host_id);
  out += fmt::format("hostname:    {}\n", host.hostname);
  out += fmt::format("NUMA nodes:  {}\n", count_or_unknown(host.numa_nodes));
  out += fmt::format("cores:       {}\n", count_or_unknown(host.cores));
  out += fmt::format("PUs:         {}\n", count_or_unknown(host.pus));
  const std::string numa =
      rank.numa_node >= 0 ? fmt::format("NUMA node {}", rank.numa_node) : "NUMA node unknown";
  const std::string cpus = rank.cpus.empty() ? "unknown" : format_cpu_list(rank.cpus);
  out += fmt::format("process:     pid {}, bound to CPUs {} ({})\n", rank.pid, cpus, numa);
  out += fmt::format("PCI devices: {}\n", host.devices.size());
  if (!host.devices.empty()) out += device_table(host.devices);
  return out;
}

}  // namespace loom::topo
