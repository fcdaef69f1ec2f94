// Local discovery with hwloc: this host's NUMA nodes, cores, PUs and PCI devices (probed once
// per process and cached), and the calling thread's CPU binding (read at every call). Anything
// hwloc cannot tell is left unknown; discovery never fails because of hwloc.
#include <hwloc.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <thread>

#include "log/log.hpp"
#include "topology/hwloc_machine.hpp"
#include "topology/net_links.hpp"
#include "topology/topology.hpp"

namespace loom::topo {
namespace {

constexpr unsigned kVendorNvidia = 0x10de;
constexpr unsigned kVendorAmd = 0x1002;
constexpr unsigned kClassDisplay = 0x03;       // base class: display controller (VGA, 3D, ...)
constexpr unsigned kClassNetwork = 0x02;       // base class: network controller
constexpr unsigned kClassAccelerator = 0x12;   // base class: processing accelerator
constexpr unsigned kClass3d = 0x0302;          // display: 3D controller
constexpr unsigned kClassInfiniband = 0x0c06;  // serial bus: InfiniBand
constexpr std::size_t kBootIdChars = 8;

// The hwloc topology of this machine with its important I/O devices, loaded once per process.
class HwlocTopology {
 public:
  HwlocTopology() {
    if (hwloc_topology_init(&topo_) != 0) {
      topo_ = nullptr;
      return;
    }
    // Failing to keep I/O objects only loses the device list.
    (void)hwloc_topology_set_io_types_filter(topo_, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (hwloc_topology_load(topo_) != 0) {
      hwloc_topology_destroy(topo_);
      topo_ = nullptr;
    }
  }
  ~HwlocTopology() {
    if (topo_ != nullptr) hwloc_topology_destroy(topo_);
  }
  HwlocTopology(const HwlocTopology&) = delete;
  HwlocTopology& operator=(const HwlocTopology&) = delete;

  /// nullptr when hwloc could not load a topology.
  [[nodiscard]] hwloc_topology_t get() const { return topo_; }

 private:
  hwloc_topology_t topo_ = nullptr;
};

std::string local_hostname() {
  std::array<char, 256> name{};
  if (::gethostname(name.data(), name.size() - 1) != 0 || name[0] == '\0') return "unknown";
  return name.data();
}

// The first characters of this boot's id, "" when the kernel does not say.
std::string boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (!(in >> id)) return "";
  return id.substr(0, kBootIdChars);
}

// The NUMA node (OS index) whose CPUs include all of `cpus`, else -1 (several nodes, none).
int numa_of_cpuset(hwloc_topology_t t, hwloc_const_cpuset_t cpus) {
  if (hwloc_bitmap_iszero(cpus)) return -1;
  for (hwloc_obj_t node = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, nullptr);
       node != nullptr; node = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, node)) {
    if (node->cpuset != nullptr && hwloc_bitmap_isincluded(cpus, node->cpuset))
      return static_cast<int>(node->os_index);
  }
  return -1;
}

int numa_of_device(hwloc_topology_t t, hwloc_obj_t pci) {
  hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(t, pci);
  if (anc == nullptr || anc->nodeset == nullptr || hwloc_bitmap_weight(anc->nodeset) != 1)
    return -1;
  return hwloc_bitmap_first(anc->nodeset);
}

std::string classify(hwloc_obj_t pci) {
  const unsigned cls = pci->attr->pcidev.class_id;
  const unsigned base = cls >> 8;
  const unsigned vendor = pci->attr->pcidev.vendor_id;
  const bool gpu_vendor = vendor == kVendorNvidia || vendor == kVendorAmd;
  bool gpu =
      cls == kClass3d || (gpu_vendor && (base == kClassDisplay || base == kClassAccelerator));
  bool nic = base == kClassNetwork || cls == kClassInfiniband;
  for (hwloc_obj_t c = pci->io_first_child; c != nullptr; c = c->next_sibling) {
    if (c->type != HWLOC_OBJ_OS_DEVICE) continue;
    const auto type = c->attr->osdev.type;
    // A DRM "card" of another vendor (a server's BMC VGA) is not a compute GPU.
    if (type == HWLOC_OBJ_OSDEV_COPROC || (type == HWLOC_OBJ_OSDEV_GPU && gpu_vendor)) gpu = true;
    if (type == HWLOC_OBJ_OSDEV_NETWORK || type == HWLOC_OBJ_OSDEV_OPENFABRICS) nic = true;
  }
  return gpu ? "gpu" : nic ? "nic" : "other";
}

std::string bus_id_of(const hwloc_obj_attr_u::hwloc_pcidev_attr_s& a) {
  return fmt::format("{:04x}:{:02x}:{:02x}.{:x}", a.domain, a.bus, a.dev, a.func);
}

std::vector<std::string> os_names(hwloc_obj_t pci) {
  std::vector<std::string> names;
  for (hwloc_obj_t c = pci->io_first_child; c != nullptr; c = c->next_sibling)
    if (c->type == HWLOC_OBJ_OS_DEVICE && c->name != nullptr) names.emplace_back(c->name);
  return names;
}

// The topmost PCI bridge above `pci` below its host bridge (see PciDevice::pci_switch).
std::string pci_switch_of(hwloc_obj_t pci) {
  std::string top;
  for (hwloc_obj_t p = pci->parent; p != nullptr && p->type == HWLOC_OBJ_BRIDGE; p = p->parent) {
    if (p->attr->bridge.upstream_type != HWLOC_OBJ_BRIDGE_PCI) break;  // the host bridge
    top = bus_id_of(p->attr->bridge.upstream.pci);
  }
  return top;
}

// OS device names, then the model: "eth0 (Virtio network device)", "cuda0, card1 (10de:2330)".
std::string device_name(hwloc_obj_t pci, const std::vector<std::string>& names) {
  std::string listed;
  for (const std::string& n : names) listed += (listed.empty() ? "" : ", ") + n;
  const char* model = hwloc_obj_get_info_by_name(pci, "PCIDevice");
  const auto& a = pci->attr->pcidev;
  std::string what = model != nullptr && model[0] != '\0'
                         ? std::string(model)
                         : fmt::format("{:04x}:{:04x}", a.vendor_id, a.device_id);
  return listed.empty() ? what : listed + " (" + what + ")";
}

std::vector<PciDevice> pci_devices(hwloc_topology_t t) {
  std::vector<PciDevice> out;
  for (hwloc_obj_t pci = hwloc_get_next_pcidev(t, nullptr); pci != nullptr;
       pci = hwloc_get_next_pcidev(t, pci)) {
    const auto& a = pci->attr->pcidev;
    PciDevice d;
    d.kind = classify(pci);
    d.os_names = os_names(pci);
    d.name = device_name(pci, d.os_names);
    d.bus_id = bus_id_of(a);
    d.pci_switch = pci_switch_of(pci);
    d.numa_node = numa_of_device(t, pci);
    d.link_gbps = a.linkspeed > 0 ? static_cast<double>(a.linkspeed) : 0.0;
    out.push_back(std::move(d));
  }
  return out;
}

int count(hwloc_topology_t t, hwloc_obj_type_t type) {
  return std::max(0, hwloc_get_nbobjs_by_type(t, type));
}

// What does not change while the process runs: probed once. host_id is filled in per call.
const HostInfo& host_facts() {
  static const HostInfo facts = [] {
    HostInfo h;
    h.hostname = local_hostname();
    hwloc_topology_t t = hwloc_machine();
    if (t == nullptr) {
      LOOM_LOG_WARN(Topo, "hwloc could not load this host's topology; it is left unknown");
      h.pus = static_cast<int>(std::thread::hardware_concurrency());
      return h;
    }
    h.numa_nodes = count(t, HWLOC_OBJ_NUMANODE);
    h.cores = count(t, HWLOC_OBJ_CORE);
    h.pus = count(t, HWLOC_OBJ_PU);
    h.devices = pci_devices(t);
    return h;
  }();
  return facts;
}

// The CPUs the calling thread is bound to (OS indices; the process's binding when the thread's
// cannot be read) and their NUMA node. The calling thread drives the rank, and when ranks run
// as threads of one process each may be bound differently.
void read_binding(RankInfo& r) {
  hwloc_topology_t t = hwloc_machine();
  if (t == nullptr) return;
  Bitmap bound;
  if (bound.set == nullptr) return;
  if (hwloc_get_cpubind(t, bound.set, HWLOC_CPUBIND_THREAD) != 0 &&
      hwloc_get_cpubind(t, bound.set, HWLOC_CPUBIND_PROCESS) != 0)
    return;
  hwloc_bitmap_and(bound.set, bound.set, hwloc_topology_get_topology_cpuset(t));
  if (hwloc_bitmap_weight(bound.set) <= 0) return;
  for (int cpu = hwloc_bitmap_first(bound.set); cpu >= 0; cpu = hwloc_bitmap_next(bound.set, cpu))
    r.cpus.push_back(cpu);
  r.numa_node = numa_of_cpuset(t, bound.set);
}

std::size_t count_kind(const HostInfo& h, std::string_view kind) {
  std::size_t n = 0;
  for (const PciDevice& d : h.devices) n += d.kind == kind ? 1 : 0;
  return n;
}

}  // namespace

hwloc_topology_t hwloc_machine() {
  static const HwlocTopology topology;
  return topology.get();
}

Result<std::pair<RankInfo, HostInfo>> discover_local(int rank, const config::Config& cfg) {
  if (rank < 0) return make_error(ErrorCode::InvalidArgument, "discover_local: rank {}", rank);
  HostInfo host = host_facts();
  const std::string override_id = cfg.has("LOOM_HOST_ID") ? cfg.get_string("LOOM_HOST_ID") : "";
  if (!override_id.empty()) {
    host.host_id = override_id;
  } else {
    static const std::string boot = boot_id();
    host.host_id = boot.empty() ? host.hostname : host.hostname + ":" + boot;
  }
  const std::string pci_file = cfg.get_string("LOOM_PCI_TOPO_FILE");
  if (!pci_file.empty()) {
    auto overrides = read_pci_overrides(pci_file);
    Status st = overrides.is_ok() ? apply_pci_overrides(host, *overrides) : overrides.status();
    if (!st.is_ok())
      return st.with_context(fmt::format("rank {}: LOOM_PCI_TOPO_FILE={}", rank, pci_file));
  }
  const NetRate net = summarize(local_net_links(cfg.get_string("LOOM_SOCKET_IFNAME")));
  host.nic_gbps = net.link_gbps;
  host.nics = net.links;
  host.nic_burst_bytes = net.burst_bytes;
  RankInfo info;
  info.rank = rank;
  info.host_id = host.host_id;
  info.hostname = host.hostname;
  info.pid = static_cast<int>(::getpid());
  read_binding(info);
  LOOM_LOG_INFO(Topo,
                "rank {}: host {} ({}), {} NUMA node(s), {} cores, {} PUs, {} GPU(s), {} NIC(s), "
                "{} network link(s) at {:.3f} GB/s; bound to CPUs {} (NUMA node {})",
                rank, host.host_id, host.hostname, host.numa_nodes, host.cores, host.pus,
                count_kind(host, "gpu"), count_kind(host, "nic"), host.nics, host.nic_gbps,
                format_cpu_list(info.cpus), info.numa_node);
  return std::pair{std::move(info), std::move(host)};
}

}  // namespace loom::topo
