// Where a launcher binds its local ranks: each rank a contiguous share of the cores it may use.
#pragma once

#include <vector>

namespace loom::topo {

struct Topology;

/// One core: the OS indices of its PUs (hardware threads), ascending.
using CoreCpus = std::vector<int>;

/// The cores this process may run on, in hwloc's (physical) order, each with only its PUs the
/// process may use; cores with none are left out. Empty when hwloc cannot tell.
std::vector<CoreCpus> allowed_cores();

/// The CPUs of each of `nranks` ranks sharing `cores` in blocks: rank r gets the cores from
/// floor(r x C / n) up to floor((r + 1) x C / n), at least one. With more ranks than cores,
/// consecutive ranks share a core (they exchange with each other most, in rings and in the
/// chains of a host); with fewer, each rank has C / n cores to itself. Pure; empty lists
/// when `cores` is empty.
std::vector<std::vector<int>> block_binding(const std::vector<CoreCpus>& cores, int nranks);

/// How many ranks share the busiest CPU that `rank` may run on: each rank of its host counts
/// 1/k on each of the k CPUs it is bound to (unbound ranks, bound to all C CPUs, make P/C; 8
/// ranks bound 4 to a CPU make 4). 0 when a rank of the host has no known binding.
double cpu_load(const Topology& t, int rank);
/// The same for the busiest CPU of `rank`'s whole host (0 when a binding is unknown).
double host_cpu_load(const Topology& t, int rank);

}  // namespace loom::topo
