// Which NICs a rank should use: those nearest to what it computes with (its GPU, else its
// CPUs), as NCCL pairs each GPU with the NICs under its PCIe switch. Pure: it reads a HostInfo
// (hwloc's discovery, or a LOOM_TOPO_FILE), so any server can be faked in a test.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "topology/topology.hpp"

namespace loom::topo {

/// How near a NIC is to a rank, nearest first.
enum class NicPlace {
  SameSwitch,  // under the same PCIe switch tree as the rank's GPU
  SameNuma,    // on the NUMA node of the rank's GPU (or of its CPU binding, without a GPU)
  Far,         // on another NUMA node
  Unknown,     // not among the host's PCI devices, or its NUMA node is unknown
};

std::string_view to_string(NicPlace p);

/// The device `name` denotes on `host`: a NIC with an OS device of that name, or of which the
/// name is a libfabric domain ("rdmap16s27-rdm" is the EFA device rdmap16s27); nullptr if none.
const PciDevice* find_nic(const HostInfo& host, std::string_view name);

/// Where `name` is relative to the rank: its GPU at `gpu_bus_id` (empty: none, or not known to
/// the host's device list: then the rank's CPU binding counts).
NicPlace place_of_nic(const HostInfo& host, const RankInfo& rank, std::string_view gpu_bus_id,
                      std::string_view name);

struct NicChoice {
  std::vector<std::string> names;  // the chosen candidates, in the candidates' order
  std::string why;                 // for the logs, e.g. "same PCI switch as GPU 0000:53:00.0"
};

/// The nearest of `candidates`: every candidate at the best place found, or all of them when
/// none is nearer than another NUMA node (nothing to prefer).
NicChoice nearest_nics(const HostInfo& host, const RankInfo& rank, std::string_view gpu_bus_id,
                       const std::vector<std::string>& candidates);

/// The same for `rank` of a job (on its host); all candidates when its host is unknown.
NicChoice nearest_nics(const Topology& job, int rank, std::string_view gpu_bus_id,
                       const std::vector<std::string>& candidates);

}  // namespace loom::topo
