// Which NICs a rank takes with LOOM_OFI_DOMAINS=near: topo::nearest_nics over faked servers.
#include <catch2/catch.hpp>

#include "topology/nic_choice.hpp"

using loom::topo::HostInfo;
using loom::topo::NicPlace;
using loom::topo::PciDevice;
using loom::topo::RankInfo;

namespace {

PciDevice pci_device(std::string kind, std::string bus, int numa, std::vector<std::string> names,
                     std::string pci_switch) {
  PciDevice d;
  d.kind = std::move(kind);
  d.bus_id = std::move(bus);
  d.numa_node = numa;
  d.os_names = std::move(names);
  d.pci_switch = std::move(pci_switch);
  return d;
}

// A p4d-like server: 2 NUMA nodes, 4 PCIe switches, each with 2 GPUs and 1 EFA device.
HostInfo four_switch_server() {
  HostInfo h;
  h.host_id = "p4d";
  h.numa_nodes = 2;
  for (int s = 0; s < 4; ++s) {
    const std::string sw = fmt::format("0000:{:02x}:00.0", 0x10 * (s + 1));
    const int numa = s / 2;
    for (int g = 0; g < 2; ++g)
      h.devices.push_back(pci_device("gpu", fmt::format("0000:{:02x}:00.0", 0x10 * (s + 1) + 2 + g),
                                     numa, {fmt::format("cuda{}", 2 * s + g)}, sw));
    h.devices.push_back(pci_device("nic", fmt::format("0000:{:02x}:00.0", 0x10 * (s + 1) + 5), numa,
                                   {fmt::format("rdmap{}s27", 0x10 * (s + 1))}, sw));
  }
  h.devices.push_back(pci_device("nic", "0000:00:05.0", -1, {"eth0"}, ""));  // the host's own NIC
  return h;
}

RankInfo bound_to(int numa) {
  RankInfo r;
  r.rank = 0;
  r.host_id = "p4d";
  r.numa_node = numa;
  r.cpus = numa == 0 ? std::vector<int>{0, 1} : std::vector<int>{48, 49};
  return r;
}

const std::vector<std::string> kEfa = {"rdmap16s27-rdm", "rdmap32s27-rdm", "rdmap48s27-rdm",
                                       "rdmap64s27-rdm"};

}  // namespace

TEST_CASE("nic choice: a libfabric domain names its device", "[topology][nic]") {
  const HostInfo h = four_switch_server();
  REQUIRE(loom::topo::find_nic(h, "rdmap16s27-rdm") != nullptr);
  CHECK(loom::topo::find_nic(h, "rdmap16s27-rdm")->bus_id == "0000:15:00.0");
  CHECK(loom::topo::find_nic(h, "rdmap16s27") == loom::topo::find_nic(h, "rdmap16s27-rdm"));
  CHECK(loom::topo::find_nic(h, "eth0")->bus_id == "0000:00:05.0");
  CHECK(loom::topo::find_nic(h, "rdmap16s2") == nullptr);  // a prefix of a name is not the name
  CHECK(loom::topo::find_nic(h, "rdmap16s27x") == nullptr);
  CHECK(loom::topo::find_nic(h, "cuda0") == nullptr);  // a GPU is not a NIC
  CHECK(loom::topo::find_nic(h, "") == nullptr);
}

TEST_CASE("nic choice: each GPU takes the NIC under its PCIe switch", "[topology][nic]") {
  const HostInfo h = four_switch_server();
  for (int gpu = 0; gpu < 8; ++gpu) {
    const int sw = gpu / 2;
    const std::string bus = fmt::format("0000:{:02x}:00.0", 0x10 * (sw + 1) + 2 + gpu % 2);
    INFO("GPU " << gpu << " at " << bus);
    auto pick = loom::topo::nearest_nics(h, bound_to(sw / 2), bus, kEfa);
    REQUIRE(pick.names.size() == 1);
    CHECK(pick.names[0] == kEfa[static_cast<std::size_t>(sw)]);
    CHECK_THAT(pick.why, Catch::Contains("same PCI switch as GPU " + bus));
    CHECK(loom::topo::place_of_nic(h, bound_to(0), bus, kEfa[static_cast<std::size_t>(sw)]) ==
          NicPlace::SameSwitch);
  }
}

TEST_CASE("nic choice: without a GPU, the NICs on the rank's NUMA node", "[topology][nic]") {
  const HostInfo h = four_switch_server();
  auto on0 = loom::topo::nearest_nics(h, bound_to(0), "", kEfa);
  CHECK(on0.names == std::vector<std::string>{kEfa[0], kEfa[1]});
  CHECK_THAT(on0.why, Catch::Contains("2 of 4: same NUMA node as CPUs 0-1 (NUMA node 0)"));
  auto on1 = loom::topo::nearest_nics(h, bound_to(1), "", kEfa);
  CHECK(on1.names == std::vector<std::string>{kEfa[2], kEfa[3]});
  CHECK(loom::topo::place_of_nic(h, bound_to(1), "", kEfa[0]) == NicPlace::Far);
  // A GPU the host does not list (an unknown bus id) does not count: the CPUs do.
  CHECK(loom::topo::nearest_nics(h, bound_to(1), "0000:ff:00.0", kEfa).names == on1.names);
  // A GPU under a switch without a NIC: the NICs of its NUMA node.
  HostInfo lone = h;
  lone.devices.push_back(pci_device("gpu", "0000:a0:00.0", 1, {"cuda8"}, "0000:9f:00.0"));
  CHECK(loom::topo::nearest_nics(lone, bound_to(0), "0000:a0:00.0", kEfa).names == on1.names);
}

TEST_CASE("nic choice: all candidates when none is nearer", "[topology][nic]") {
  const HostInfo h = four_switch_server();
  // Unbound (several NUMA nodes): nothing to prefer.
  auto unbound = loom::topo::nearest_nics(h, bound_to(-1), "", kEfa);
  CHECK(unbound.names == kEfa);
  CHECK_THAT(unbound.why, Catch::Contains("none is nearer"));
  // Every candidate on the other NUMA node: all of them, rather than none.
  const std::vector<std::string> far = {kEfa[2], kEfa[3]};
  CHECK(loom::topo::nearest_nics(h, bound_to(0), "", far).names == far);
  // Names the host does not list (veth pairs, a faked interface): all of them.
  const std::vector<std::string> virtual_nics = {"eth1", "eth2"};
  CHECK(loom::topo::nearest_nics(h, bound_to(0), "", virtual_nics).names == virtual_nics);
  CHECK(loom::topo::place_of_nic(h, bound_to(0), "", "eth1") == NicPlace::Unknown);
  CHECK(loom::topo::place_of_nic(h, bound_to(0), "", "eth0") == NicPlace::Unknown);  // no NUMA
  // A known near NIC beats unknown ones.
  const std::vector<std::string> mixed = {"eth1", kEfa[1], kEfa[3]};
  CHECK(loom::topo::nearest_nics(h, bound_to(0), "", mixed).names ==
        std::vector<std::string>{kEfa[1]});
  CHECK(loom::topo::nearest_nics(h, bound_to(0), "", {}).names.empty());
}

TEST_CASE("nic choice: a job's rank chooses on its own host", "[topology][nic]") {
  RankInfo r0 = bound_to(1);
  RankInfo r1 = bound_to(0);
  r1.rank = 1;
  r1.host_id = "other";
  HostInfo other;
  other.host_id = "other";
  loom::topo::Topology job = loom::topo::assemble({{r0, four_switch_server()}, {r1, other}});
  CHECK(loom::topo::nearest_nics(job, 0, "", kEfa).names ==
        std::vector<std::string>{kEfa[2], kEfa[3]});
  CHECK(loom::topo::nearest_nics(job, 1, "", kEfa).names == kEfa);  // its host lists no NIC
  auto unknown = loom::topo::nearest_nics(job, 7, "", kEfa);
  CHECK(unknown.names == kEfa);
  CHECK_THAT(unknown.why, Catch::Contains("host is unknown"));
}
