// The job's topology as plain values: which host each rank runs on, where it is bound, and what
// each host holds (NUMA nodes, cores, GPUs, NICs). discover_local() probes this process with
// hwloc; a whole-job Topology is assembled from every rank's local part (exchanged through the
// bootstrap with encode/decode), and can be written to and read from a JSON file so tests can
// fake any cluster. ring_order() turns a Topology into a ring order for the ring algorithms.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.hpp"
#include "config/config.hpp"

namespace loom::topo {

/// A PCI device of a host. Unknown numbers are -1 (NUMA node) or 0 (link speed).
struct PciDevice {
  std::string kind;      // "gpu", "nic" or "other"
  std::string name;      // OS device names and model, e.g. "eth0 (Virtio network device)"
  std::string bus_id;    // "0000:00:03.0"
  int numa_node = -1;    // OS index of the NUMA node the device is attached to, -1 unknown
  double link_gbps = 0;  // PCI link speed in GB/s, 0 unknown
  std::vector<std::string> os_names;  // its OS devices: "eth0", "rdmap16s27", "cuda0"
  /// The PCI address of the topmost PCI bridge above the device, below its host bridge: devices
  /// with the same one sit under one PCIe switch tree (a GPU and its NIC on GPU servers). Empty
  /// when the device hangs off the host bridge, or unknown.
  std::string pci_switch;

  bool operator==(const PciDevice&) const = default;
};

/// A correction to what hwloc sees of one PCI device, from LOOM_PCI_TOPO_FILE (virtual machines
/// often do not show the PCIe switches, AWS p4d and p5 instances among them). The
/// fields given replace the discovered ones; a bus id hwloc did not find adds a device (its kind
/// is then required).
struct PciOverride {
  std::string bus_id;  // canonical: "0000:4f:00.0"
  std::optional<std::string> kind;
  std::optional<std::vector<std::string>> os_names;
  std::optional<std::string> pci_switch;
  std::optional<int> numa_node;

  bool operator==(const PciOverride&) const = default;
};

/// One rank: its process and where it is bound.
struct RankInfo {
  int rank = -1;
  std::string host_id;  // equal on exactly the ranks that share a host
  std::string hostname;
  int pid = 0;
  int numa_node = -1;     // NUMA node (OS index) of the rank's CPU binding, -1 unknown or several
  std::vector<int> cpus;  // OS indices of the CPUs the rank is bound to (ascending)

  bool operator==(const RankInfo&) const = default;
};

/// One host. Counts of 0 mean unknown.
struct HostInfo {
  std::string host_id;
  std::string hostname;
  int numa_nodes = 0;
  int cores = 0;
  int pus = 0;  // hardware threads
  std::vector<PciDevice> devices;
  /// Its network (net_links.hpp): the rate of one interface in GB/s (the slowest known) and how
  /// many interfaces have a known rate; 0 unknown.
  double nic_gbps = 0;
  int nics = 0;
  /// The smallest token bucket (tc tbf) among them in bytes; 0: none.
  double nic_burst_bytes = 0;

  bool operator==(const HostInfo&) const = default;
};

/// The whole job. ranks[r].rank == r; hosts holds one entry per distinct host_id, ordered by
/// the lowest rank on each (as assemble() builds it).
struct Topology {
  std::vector<RankInfo> ranks;
  std::vector<HostInfo> hosts;

  [[nodiscard]] int nranks() const { return static_cast<int>(ranks.size()); }
  [[nodiscard]] int nhosts() const { return static_cast<int>(hosts.size()); }
  /// Index into `hosts` of the host of `rank`, or -1 for an unknown rank or host.
  [[nodiscard]] int host_of(int rank) const;
  /// The ranks on hosts[host], ascending (empty for a bad index).
  [[nodiscard]] std::vector<int> ranks_on_host(int host) const;
  /// True when both ranks exist and have the same host_id.
  [[nodiscard]] bool same_host(int a, int b) const;

  bool operator==(const Topology&) const = default;
};

// --- Discovery --------------------------------------------------------------------------------

/// Probes this process and its host with hwloc (loaded once per process, then cached). The host
/// id is LOOM_HOST_ID when set, else hostname + ":" + the first 8 characters of the boot id.
/// The binding is the calling thread's (else the process's): call it on the rank's thread.
/// LOOM_PCI_TOPO_FILE corrects the PCI devices. Whatever hwloc cannot tell is left unknown; this
/// fails only for a negative rank or a bad LOOM_PCI_TOPO_FILE.
Result<std::pair<RankInfo, HostInfo>> discover_local(int rank, const config::Config& cfg);

/// Applies `overrides` to `host.devices` (see PciOverride); an unknown bus id without a kind is
/// an error naming it.
Status apply_pci_overrides(HostInfo& host, const std::vector<PciOverride>& overrides);

/// A human-readable report of this process and its host (for `loom-info --topology`).
std::string describe_local(const RankInfo& rank, const HostInfo& host);

/// CPU indices as ranges, e.g. "0-3,8,10-11" ("-" when empty). Expects ascending indices.
std::string format_cpu_list(const std::vector<int>& cpus);

// --- Assembly, ring order ---------------------------------------------------------------------

/// The job's topology from every rank's local part: ranks sorted by RankInfo::rank, hosts
/// deduplicated by host_id (the lowest rank's HostInfo wins), in order of their lowest rank.
Topology assemble(std::vector<std::pair<RankInfo, HostInfo>> parts);

/// Checks that ranks[r].rank == r, host ids are non-empty and distinct, and every rank's host is
/// listed. The message names the offending field, e.g. "ranks[3].host_id".
Status validate(const Topology& t);

/// A topology-aware ring order (order[i] = rank at ring position i), for algo::RingParams::order.
/// Pure and deterministic (depends only on ranks[].host_id and ranks[].numa_node):
///  - hosts are ordered by their lowest rank and each host's ranks are contiguous, so the ring
///    enters and leaves each host exactly once;
///  - inside a host, ranks on the same NUMA node are adjacent (unknown, -1, is a group of its
///    own); groups are ordered by their lowest rank, ranks ascending inside a group.
/// One host with unknown NUMA gives 0..n-1.
std::vector<int> ring_order(const Topology& t);

/// The order for logs: ranks separated by spaces, " | " where the ring crosses hosts,
/// e.g. "0 1 | 2 3".
std::string describe_ring(const Topology& t, const std::vector<int>& order);

// --- Serialization ----------------------------------------------------------------------------

/// Pretty JSON with a "version": 1 field; readable by from_json.
std::string to_json(const Topology& t);
/// Parses and validates to_json's format. Errors name the offending field ("hosts[0].cores").
Result<Topology> from_json(std::string_view text);

/// One rank's part for the bootstrap exchange (compact JSON bytes).
std::vector<std::uint8_t> encode(const RankInfo& rank, const HostInfo& host);
Result<std::pair<RankInfo, HostInfo>> decode(std::span<const std::uint8_t> bytes);

/// Writes to_json(t) to `path` (through a temporary file renamed into place).
Status write_file(const Topology& t, const std::string& path);
/// Reads and validates a file written by write_file (or by hand in the same format).
Result<Topology> read_file(const std::string& path);

/// LOOM_PCI_TOPO_FILE's format: {"version": 1, "devices": [{"bus_id": "0000:4f:00.0",
/// "pci_switch": "0000:45:00.0", "numa_node": 0, "kind": "nic", "os_names": ["rdmap79s0"]}]},
/// every field but bus_id optional. Errors name the field ("devices[2].numa_node").
Result<std::vector<PciOverride>> pci_overrides_from_json(std::string_view text);
Result<std::vector<PciOverride>> read_pci_overrides(const std::string& path);

}  // namespace loom::topo
