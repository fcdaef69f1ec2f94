#include "topology/cpu_binding.hpp"

#include <algorithm>
#include <map>

#include "topology/hwloc_machine.hpp"
#include "topology/topology.hpp"

namespace loom::topo {

std::vector<CoreCpus> allowed_cores() {
  hwloc_topology_t t = hwloc_machine();
  Bitmap allowed;
  if (t == nullptr || allowed.set == nullptr) return {};
  if (hwloc_get_cpubind(t, allowed.set, HWLOC_CPUBIND_PROCESS) != 0) return {};
  std::vector<CoreCpus> cores;
  const int n = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
  for (int i = 0; i < n; ++i) {
    hwloc_obj_t core = hwloc_get_obj_by_type(t, HWLOC_OBJ_CORE, static_cast<unsigned>(i));
    if (core == nullptr || core->cpuset == nullptr) continue;
    CoreCpus cpus;
    for (int pu = hwloc_bitmap_first(core->cpuset); pu >= 0;
         pu = hwloc_bitmap_next(core->cpuset, pu))
      if (hwloc_bitmap_isset(allowed.set, static_cast<unsigned>(pu)) != 0) cpus.push_back(pu);
    if (!cpus.empty()) cores.push_back(std::move(cpus));
  }
  return cores;
}

std::vector<std::vector<int>> block_binding(const std::vector<CoreCpus>& cores, int nranks) {
  std::vector<std::vector<int>> out(static_cast<std::size_t>(std::max(nranks, 0)));
  const auto c = static_cast<long>(cores.size());
  if (c == 0) return out;
  for (int r = 0; r < nranks; ++r) {
    const long first = r * c / nranks;
    const long last = std::max(first + 1, (r + 1) * c / nranks);
    std::vector<int>& cpus = out[static_cast<std::size_t>(r)];
    for (long i = first; i < last; ++i)
      cpus.insert(cpus.end(), cores[static_cast<std::size_t>(i)].begin(),
                  cores[static_cast<std::size_t>(i)].end());
    std::sort(cpus.begin(), cpus.end());
  }
  return out;
}

namespace {

// The ranks on each CPU of `rank`'s host (a rank bound to k CPUs counts 1/k on each); empty
// when a rank of the host has no known binding.
std::map<int, double> ranks_per_cpu(const Topology& t, int rank) {
  const int host = t.host_of(rank);
  std::map<int, double> per_cpu;
  if (host < 0) return per_cpu;
  for (int r : t.ranks_on_host(host)) {
    const std::vector<int>& cpus = t.ranks[static_cast<std::size_t>(r)].cpus;
    if (cpus.empty()) return {};
    for (int cpu : cpus) per_cpu[cpu] += 1.0 / static_cast<double>(cpus.size());
  }
  return per_cpu;
}

}  // namespace

double cpu_load(const Topology& t, int rank) {
  std::map<int, double> per_cpu = ranks_per_cpu(t, rank);
  if (per_cpu.empty()) return 0;
  double busiest = 0;
  for (int cpu : t.ranks[static_cast<std::size_t>(rank)].cpus)
    busiest = std::max(busiest, per_cpu[cpu]);
  return busiest;
}

double host_cpu_load(const Topology& t, int rank) {
  double busiest = 0;
  for (const auto& [cpu, ranks] : ranks_per_cpu(t, rank)) busiest = std::max(busiest, ranks);
  return busiest;
}

}  // namespace loom::topo
