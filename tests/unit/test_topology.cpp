// Topology: local discovery with hwloc, JSON and per-rank serialization, assembly, and the
// properties of the topology-aware ring order on fake clusters of 1..64 hosts.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "config/config.hpp"
#include "topology/cpu_binding.hpp"
#include "topology/topology.hpp"

using namespace loom;
using Catch::Matchers::Contains;
using topo::HostInfo;
using topo::PciDevice;
using topo::RankInfo;
using topo::Topology;

namespace {

enum class Placement { Block, RoundRobin, Random, Uneven };

const char* placement_name(Placement p) {
  switch (p) {
    case Placement::Block: return "block";
    case Placement::RoundRobin: return "round-robin";
    case Placement::Random: return "random";
    case Placement::Uneven: return "uneven";
  }
  return "?";
}

// host[r] for every rank of a fake cluster of `hosts` hosts with `per_host` ranks each (Uneven:
// 1..8 ranks per host, drawn from `rng`).
std::vector<int> place(int hosts, int per_host, Placement p, std::mt19937& rng) {
  std::vector<int> slots;  // one entry per rank slot: its host
  for (int h = 0; h < hosts; ++h) {
    const int n = p == Placement::Uneven ? 1 + static_cast<int>(rng() % 8) : per_host;
    for (int k = 0; k < n; ++k) slots.push_back(h);
  }
  const int nranks = static_cast<int>(slots.size());
  std::vector<int> host(static_cast<std::size_t>(nranks));
  for (int r = 0; r < nranks; ++r) host[r] = p == Placement::RoundRobin ? r % hosts : slots[r];
  if (p == Placement::Random || p == Placement::Uneven) std::shuffle(host.begin(), host.end(), rng);
  return host;
}

// A fake topology, built the way a job builds it: every rank's part, assembled. NUMA nodes per
// host: 0 = unknown; in the random placements some ranks also have unknown NUMA.
Topology fake_cluster(int hosts, int per_host, Placement p, int numa, unsigned seed) {
  std::mt19937 rng(seed);
  const std::vector<int> host = place(hosts, per_host, p, rng);
  std::vector<int> seen_on_host(static_cast<std::size_t>(hosts), 0);
  std::vector<std::pair<RankInfo, HostInfo>> parts;
  for (int r = 0; r < static_cast<int>(host.size()); ++r) {
    RankInfo info;
    info.rank = r;
    info.host_id = "node" + std::to_string(hosts - 1 - host[r]);  // ids not in rank order
    info.hostname = info.host_id;
    const int k = seen_on_host[host[r]]++;
    if (numa > 0) {
      const bool random = p == Placement::Random || p == Placement::Uneven;
      info.numa_node = random ? static_cast<int>(rng() % (numa + 1)) - 1 : k % numa;
    }
    HostInfo h;
    h.host_id = info.host_id;
    h.numa_nodes = numa;
    parts.emplace_back(info, h);
  }
  std::shuffle(parts.begin(), parts.end(), rng);  // assemble sorts by rank
  return topo::assemble(std::move(parts));
}

// The first property of ring_order that `order` violates for `t`, or "" when it has them all.
std::string ring_violation(const Topology& t, const std::vector<int>& order) {
  const int n = t.nranks();
  std::vector<int> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int> iota(static_cast<std::size_t>(n));
  std::iota(iota.begin(), iota.end(), 0);
  if (sorted != iota) return "not a permutation of the ranks";
  if (n == 0) return "";
  if (order[0] != 0) return "rank 0 is not first";
  auto host_id = [&](int r) { return t.ranks[r].host_id; };
  int host_changes = 0;
  for (int i = 0; i < n; ++i) host_changes += host_id(order[i]) != host_id(order[(i + 1) % n]);
  if (host_changes != (t.nhosts() > 1 ? t.nhosts() : 0))
    return "the ring crosses hosts " + std::to_string(host_changes) + " times";
  // (host, NUMA) groups: each one run, ranks ascending in it, hosts entered at their lowest rank
  // and in order of their lowest rank.
  std::set<std::pair<std::string, int>> groups;
  int runs = 0;
  int last_host_start = -1;
  for (int i = 0; i < n; ++i) {
    const int r = order[i];
    groups.emplace(host_id(r), t.ranks[r].numa_node);
    const bool new_host = i == 0 || host_id(order[i - 1]) != host_id(r);
    const bool new_run = new_host || t.ranks[order[i - 1]].numa_node != t.ranks[r].numa_node;
    runs += new_run;
    if (!new_run && order[i - 1] > r) return "ranks not ascending inside a NUMA group";
    if (!new_host) continue;
    const std::vector<int> on_host = t.ranks_on_host(t.host_of(r));
    if (on_host.empty() || on_host.front() != r) return "a host is not entered at its lowest rank";
    if (r < last_host_start) return "hosts not ordered by their lowest rank";
    last_host_start = r;
  }
  if (runs != static_cast<int>(groups.size())) return "a NUMA group is split";
  return "";
}

HostInfo host_named(const std::string& id) {
  HostInfo h;
  h.host_id = id;
  return h;
}

Topology sample_topology() {
  RankInfo r0{0, "a:1234abcd", "alpha", 101, 0, {0, 1, 2, 3}};
  RankInfo r1{1, "b:99", "beta", 202, -1, {}};
  HostInfo a{"a:1234abcd", "alpha", 2, 32, 64, {}, 0.125, 2};
  a.devices.push_back({"gpu",
                       "cuda0, card1 (10de:2330)",
                       "0000:17:00.0",
                       0,
                       24.615384615384617,
                       {"cuda0", "card1"},
                       "0000:15:00.0"});
  a.devices.push_back(
      {"nic", "mlx5_0, ib0 (15b3:101b)", "0000:3b:00.0", 1, 31.5, {"mlx5_0", "ib0"}, ""});
  a.devices.push_back({"other", "1af4:1042", "0000:00:02.0", -1, 0, {}, ""});
  HostInfo b{"b:99", "beta", 1, 4, 8, {}, 0, 0};
  return topo::assemble({{r1, b}, {r0, a}});
}

}  // namespace

TEST_CASE("topology: local discovery finds this host and this process", "[topology]") {
  auto cfg = config::Config::load();
  REQUIRE(cfg.is_ok());
  auto local = topo::discover_local(3, *cfg);
  REQUIRE(local.is_ok());
  const auto& [rank, host] = *local;
  CHECK(rank.rank == 3);
  CHECK_FALSE(host.host_id.empty());
  CHECK(rank.host_id == host.host_id);
  CHECK_FALSE(host.hostname.empty());
  CHECK(rank.pid == static_cast<int>(::getpid()));
  CHECK(host.cores >= 1);
  CHECK(host.pus >= host.cores);
  CHECK(host.numa_nodes >= 1);
  CHECK_FALSE(rank.cpus.empty());
  CHECK(std::is_sorted(rank.cpus.begin(), rank.cpus.end()));
  CHECK(rank.numa_node >= -1);
  for (const PciDevice& d : host.devices) {
    CHECK((d.kind == "gpu" || d.kind == "nic" || d.kind == "other"));
    CHECK_FALSE(d.bus_id.empty());
  }
  if (cfg->raw("LOOM_HOST_ID").empty()) CHECK_THAT(host.host_id, Contains(host.hostname));

  auto again = topo::discover_local(3, *cfg);  // cached hwloc: same answer
  REQUIRE(again.is_ok());
  CHECK(again->second == host);
  CHECK_FALSE(topo::discover_local(-1, *cfg).is_ok());

  const std::string text = topo::describe_local(rank, host);
  CHECK_THAT(text, Contains(host.host_id));
  CHECK_THAT(text, Contains("PCI devices"));
  // The discovered values survive the file format.
  Topology t = topo::assemble({{rank, host}});
  t.ranks[0].rank = 0;
  auto back = topo::from_json(topo::to_json(t));
  REQUIRE(back.is_ok());
  CHECK(*back == t);
}

TEST_CASE("topology: LOOM_HOST_ID overrides the host id", "[topology]") {
  auto cfg = config::Config::load({{"LOOM_HOST_ID", "h7"}});
  REQUIRE(cfg.is_ok());
  auto local = topo::discover_local(0, *cfg);
  REQUIRE(local.is_ok());
  CHECK(local->first.host_id == "h7");
  CHECK(local->second.host_id == "h7");
}

TEST_CASE("topology: helpers and assembly", "[topology]") {
  const Topology t = sample_topology();
  REQUIRE(t.nranks() == 2);
  REQUIRE(t.nhosts() == 2);
  CHECK(t.ranks[0].hostname == "alpha");
  CHECK(t.hosts[0].host_id == "a:1234abcd");  // ordered by lowest rank
  CHECK(t.host_of(0) == 0);
  CHECK(t.host_of(1) == 1);
  CHECK(t.host_of(2) == -1);
  CHECK(t.ranks_on_host(1) == std::vector<int>{1});
  CHECK_FALSE(t.same_host(0, 1));
  CHECK(t.same_host(1, 1));
  CHECK(topo::validate(t).is_ok());

  HostInfo first{"h", "first", 1, 1, 1, {}, 0, 0};
  HostInfo second{"h", "second", 2, 2, 2, {}, 0, 0};
  const Topology one = topo::assemble(
      {{RankInfo{1, "h", "x", 0, -1, {}}, second}, {RankInfo{0, "h", "x", 0, -1, {}}, first}});
  REQUIRE(one.nhosts() == 1);
  CHECK(one.hosts[0].hostname == "first");  // the lowest rank's host info wins
  CHECK(one.ranks_on_host(0) == std::vector<int>{0, 1});
  CHECK(topo::format_cpu_list({0, 1, 2, 3, 8, 10, 11}) == "0-3,8,10-11");
  CHECK(topo::format_cpu_list({}) == "-");
}

TEST_CASE("topology: JSON, records and files round trip", "[topology]") {
  const Topology t = sample_topology();
  const std::string text = topo::to_json(t);
  CHECK_THAT(text, Contains("\"version\": 1"));
  auto back = topo::from_json(text);
  REQUIRE(back.is_ok());
  CHECK(*back == t);
  CHECK(back->hosts[0].devices.size() == 3);

  for (int r = 0; r < t.nranks(); ++r) {
    const RankInfo& rank = t.ranks[r];
    const HostInfo& host = t.hosts[t.host_of(r)];
    auto part = topo::decode(topo::encode(rank, host));
    REQUIRE(part.is_ok());
    CHECK(part->first == rank);
    CHECK(part->second == host);
  }
  const std::string junk = "{\"version\": 1}";
  CHECK_THAT(topo::decode({reinterpret_cast<const std::uint8_t*>(junk.data()), junk.size()})
                 .status()
                 .message(),
             Contains("rank"));

  const auto dir = std::filesystem::temp_directory_path();
  const std::string path = (dir / ("loom-topo-test-" + std::to_string(::getpid()) + ".json"));
  REQUIRE(topo::write_file(t, path).is_ok());
  auto loaded = topo::read_file(path);
  std::remove(path.c_str());
  REQUIRE(loaded.is_ok());
  CHECK(*loaded == t);
  auto missing = topo::read_file(path);
  REQUIRE_FALSE(missing.is_ok());
  CHECK_THAT(missing.status().message(), Contains(path));
}

TEST_CASE("topology: malformed JSON errors name the field", "[topology]") {
  const std::string rank0 = R"({"rank": 0, "host_id": "a"})";
  const std::string host_a = R"({"host_id": "a"})";
  auto doc = [](const std::string& ranks, const std::string& hosts) {
    return R"({"version": 1, "ranks": [)" + ranks + R"(], "hosts": [)" + hosts + "]}";
  };
  REQUIRE(topo::from_json(doc(rank0, host_a)).is_ok());  // optional fields may be left out
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"version\": 1, \"ranks\": [", "not valid JSON"},
      {"[1, 2]", "document: expected an object"},
      {R"({"ranks": [], "hosts": []})", "version: missing"},
      {R"({"version": 2, "ranks": [], "hosts": []})", "version: unsupported version 2"},
      {R"({"version": 1, "hosts": []})", "ranks: missing"},
      {R"({"version": 1, "ranks": {}, "hosts": []})", "ranks: expected an array"},
      {doc(rank0 + R"(, {"rank": 1, "host_id": 5})", host_a),
       "ranks[1].host_id: expected a string"},
      {doc(rank0 + R"(, {"rank": 5, "host_id": "a"})", host_a), "ranks[1].rank: is 5, expected 1"},
      {doc(R"({"rank": 0, "host_id": "a", "cpus": [0, "x"]})", host_a), "ranks[0].cpus[1]"},
      {doc(R"({"rank": 0, "host_id": "a", "pid": 1e99})", host_a), "ranks[0].pid"},
      {doc(R"({"rank": 0, "host_id": "zz"})", host_a), "ranks[0].host_id: 'zz' names no entry"},
      {doc(rank0, R"({"host_id": "a", "cores": "many"})"), "hosts[0].cores: expected an integer"},
      {doc(rank0, host_a + "," + host_a), "hosts[1].host_id: 'a' is listed twice"},
      {doc(rank0, R"({"host_id": "a", "devices": [{"kind": "gpu", "link_gbps": "fast"}]})"),
       "hosts[0].devices[0].link_gbps: expected a number"},
      {doc(rank0, R"({"host_id": "a", "devices": [{"kind": "fpga"}]})"),
       "hosts[0].devices[0].kind"},
      {doc(rank0, R"({"host_id": "a", "devices": [{"kind": "nic", "os_names": ["eth0", 3]}]})"),
       "hosts[0].devices[0].os_names[1]: expected a string"},
      {doc(rank0, R"({"host_id": "a", "devices": [{"kind": "nic", "pci_switch": 1}]})"),
       "hosts[0].devices[0].pci_switch: expected a string"},
  };
  for (const auto& [text, expected] : cases) {
    INFO(text);
    auto t = topo::from_json(text);
    REQUIRE_FALSE(t.is_ok());
    CHECK_THAT(t.status().message(), Contains(expected));
  }
}

TEST_CASE("topology: ring order examples", "[topology]") {
  CHECK(topo::ring_order(Topology{}).empty());
  for (int n = 1; n <= 16; ++n) {  // one host, NUMA unknown: the identity
    std::vector<std::pair<RankInfo, HostInfo>> parts;
    for (int r = 0; r < n; ++r)
      parts.push_back({RankInfo{r, "h", "h", 0, -1, {}}, host_named("h")});
    std::vector<int> iota(static_cast<std::size_t>(n));
    std::iota(iota.begin(), iota.end(), 0);
    CHECK(topo::ring_order(topo::assemble(parts)) == iota);
  }
  std::vector<std::pair<RankInfo, HostInfo>> parts;
  for (int r = 0; r < 4; ++r) {
    const std::string host = r % 2 == 0 ? "a" : "b";
    parts.push_back({RankInfo{r, host, host, 0, -1, {}}, host_named(host)});
  }
  Topology two = topo::assemble(parts);
  const std::vector<int> order = topo::ring_order(two);
  CHECK(order == std::vector<int>{0, 2, 1, 3});
  CHECK(topo::describe_ring(two, order) == "0 2 | 1 3");

  for (int r = 0; r < 4; ++r) {
    two.ranks[r].host_id = "a";
    two.ranks[r].numa_node = 1 - r % 2;
  }
  two.hosts.pop_back();
  CHECK(topo::ring_order(two) == std::vector<int>{0, 2, 1, 3});  // NUMA 1 first: it has rank 0
  CHECK(topo::describe_ring(two, topo::ring_order(two)) == "0 2 1 3");
}

TEST_CASE("topology: ring order properties on fake clusters", "[topology]") {
  const std::vector<int> host_counts = {1, 2, 3, 4, 5, 7, 8, 16, 31, 64};
  const std::vector<Placement> placements = {Placement::Block, Placement::RoundRobin,
                                             Placement::Random, Placement::Uneven};
  unsigned seed = 12345;
  int checked = 0;
  for (int hosts : host_counts) {
    for (int per_host = 1; per_host <= 8; ++per_host) {
      for (Placement p : placements) {
        for (int numa : {0, 1, 2, 4}) {
          const Topology t = fake_cluster(hosts, per_host, p, numa, ++seed);
          INFO(hosts << " hosts, " << per_host << " ranks/host, " << placement_name(p) << ", "
                     << numa << " NUMA nodes/host, seed " << seed);
          REQUIRE(t.nhosts() == hosts);
          REQUIRE(topo::validate(t).is_ok());
          const std::vector<int> order = topo::ring_order(t);
          REQUIRE(ring_violation(t, order) == "");
          // Deterministic, and independent of how the hosts list happens to be ordered.
          Topology reordered = t;
          std::reverse(reordered.hosts.begin(), reordered.hosts.end());
          REQUIRE(topo::ring_order(t) == order);
          REQUIRE(topo::ring_order(reordered) == order);
          ++checked;
        }
      }
    }
  }
  CHECK(checked == 10 * 8 * 4 * 4);

  // The checker itself rejects orders that break the properties.
  const Topology rr = fake_cluster(2, 2, Placement::RoundRobin, 0, 1);  // a: 0 2, b: 1 3
  CHECK(ring_violation(rr, {0, 2, 1, 3}).empty());
  CHECK(ring_violation(rr, {0, 1, 2, 3}) == "the ring crosses hosts 4 times");
  CHECK(ring_violation(rr, {0, 2, 1}) == "not a permutation of the ranks");
  CHECK(ring_violation(rr, {0, 2, 3, 1}) == "a host is not entered at its lowest rank");
  CHECK(ring_violation(rr, {1, 3, 0, 2}) == "rank 0 is not first");
  const Topology rr3 = fake_cluster(2, 3, Placement::RoundRobin, 0, 1);  // a: 0 2 4, b: 1 3 5
  CHECK(ring_violation(rr3, {0, 4, 2, 1, 3, 5}) == "ranks not ascending inside a NUMA group");
  const Topology numa = fake_cluster(1, 4, Placement::Block, 2, 1);  // NUMA 0 1 0 1
  CHECK(ring_violation(numa, {0, 2, 1, 3}).empty());
  CHECK(ring_violation(numa, {0, 1, 2, 3}) == "a NUMA group is split");
}

TEST_CASE("topology: block binding gives each rank a contiguous share of the cores", "[topology]") {
  const std::vector<topo::CoreCpus> two{{0}, {1}};
  // More ranks than cores: consecutive ranks share a core, as evenly as it goes.
  CHECK(topo::block_binding(two, 4) == std::vector<std::vector<int>>{{0}, {0}, {1}, {1}});
  CHECK(topo::block_binding(two, 3) == std::vector<std::vector<int>>{{0}, {0}, {1}});
  CHECK(topo::block_binding(two, 1) == std::vector<std::vector<int>>{{0, 1}});
  // Fewer ranks than cores: blocks of cores with all their hardware threads.
  const std::vector<topo::CoreCpus> smt{{0, 4}, {1, 5}, {2, 6}, {3, 7}};
  CHECK(topo::block_binding(smt, 2) == std::vector<std::vector<int>>{{0, 1, 4, 5}, {2, 3, 6, 7}});
  CHECK(topo::block_binding(smt, 3) == std::vector<std::vector<int>>{{0, 4}, {1, 5}, {2, 3, 6, 7}});
  CHECK(topo::block_binding({}, 2) == std::vector<std::vector<int>>{{}, {}});
  // Every rank gets at least one core, and every core goes to some rank, for any counts.
  for (int cores = 1; cores <= 9; ++cores) {
    std::vector<topo::CoreCpus> list;
    for (int c = 0; c < cores; ++c) list.push_back({c});
    for (int n = 1; n <= 20; ++n) {
      auto binding = topo::block_binding(list, n);
      REQUIRE(binding.size() == static_cast<std::size_t>(n));
      std::set<int> used;
      for (const auto& cpus : binding) {
        REQUIRE_FALSE(cpus.empty());
        used.insert(cpus.begin(), cpus.end());
      }
      CHECK(used.size() == static_cast<std::size_t>(cores));
    }
  }
}

TEST_CASE("topology: the cores this process may use", "[topology]") {
  const std::vector<topo::CoreCpus> cores = topo::allowed_cores();
  REQUIRE_FALSE(cores.empty());
  std::set<int> cpus;
  for (const auto& core : cores)
    for (int cpu : core) CHECK(cpus.insert(cpu).second);  // no CPU in two cores
  cpu_set_t mask;
  CPU_ZERO(&mask);
  REQUIRE(::sched_getaffinity(0, sizeof mask, &mask) == 0);
  CHECK(static_cast<int>(cpus.size()) == CPU_COUNT(&mask));
  for (int cpu : cpus) CHECK(CPU_ISSET(cpu, &mask));
}

TEST_CASE("topology: cpu_load counts the ranks on a rank's busiest CPU", "[topology]") {
  // parts(cpus of each rank, host of each rank)
  auto job = [](const std::vector<std::vector<int>>& cpus, const std::vector<std::string>& hosts) {
    std::vector<std::pair<RankInfo, HostInfo>> parts;
    for (std::size_t r = 0; r < cpus.size(); ++r)
      parts.push_back({RankInfo{static_cast<int>(r), hosts[r], hosts[r], 0, -1, cpus[r]},
                       host_named(hosts[r])});
    return topo::assemble(parts);
  };
  const std::vector<std::string> one(8, "h");
  // 8 unbound ranks on 2 CPUs: 4 per CPU; bound in blocks: 4; 7 in blocks: 4 on one, 3.
  CHECK(topo::cpu_load(job(std::vector<std::vector<int>>(8, {0, 1}), one), 0) == Approx(4));
  CHECK(topo::cpu_load(job({{0}, {0}, {0}, {0}, {1}, {1}, {1}, {1}}, one), 5) == Approx(4));
  const std::vector<std::string> seven(7, "h");
  const Topology t7 = job({{0}, {0}, {0}, {0}, {1}, {1}, {1}}, seven);
  CHECK(topo::cpu_load(t7, 0) == Approx(4));
  CHECK(topo::cpu_load(t7, 6) == Approx(3));
  // 2 ranks with a CPU each, 1 rank with two: 1 each.
  CHECK(topo::cpu_load(job({{0}, {1}}, {"h", "h"}), 1) == Approx(1));
  CHECK(topo::cpu_load(job({{0, 1}}, {"h"}), 0) == Approx(0.5));
  // Other hosts' ranks do not count; an unknown binding on the host makes it unknown (0).
  CHECK(topo::cpu_load(job({{0}, {0}, {0}}, {"a", "a", "b"}), 2) == Approx(1));
  CHECK(topo::cpu_load(job({{0}, {}, {0}}, {"a", "a", "b"}), 0) == Approx(0));
  // The whole host's busiest CPU: 3 ranks bound in blocks on 2 CPUs, seen from the lone rank.
  CHECK(topo::host_cpu_load(job({{0}, {0}, {1}}, {"h", "h", "h"}), 2) == Approx(2));
  CHECK(topo::cpu_load(job({{0}, {0}, {1}}, {"h", "h", "h"}), 2) == Approx(1));
  CHECK(topo::host_cpu_load(job({{0}, {}, {0}}, {"a", "a", "b"}), 0) == Approx(0));
}

TEST_CASE("topology: LOOM_PCI_TOPO_FILE corrects and adds PCI devices", "[topology]") {
  auto parsed = topo::pci_overrides_from_json(R"({"version": 1, "devices": [
      {"bus_id": "0000:3B:00.0", "pci_switch": "0000:3A:00.0", "numa_node": 0},
      {"bus_id": "0000:17:00.0", "os_names": ["cuda0"]},
      {"bus_id": "0000:c1:00.0", "kind": "nic", "os_names": ["rdmap193s0"],
       "pci_switch": "0000:c0:00.0", "numa_node": 1}]})");
  REQUIRE(parsed.is_ok());
  REQUIRE(parsed->size() == 3);
  CHECK((*parsed)[0].bus_id == "0000:3b:00.0");  // canonical form
  CHECK((*parsed)[0].pci_switch == std::optional<std::string>("0000:3a:00.0"));
  CHECK_FALSE((*parsed)[1].numa_node.has_value());
  HostInfo h = sample_topology().hosts[0];
  const PciDevice gpu_before = h.devices[0];
  REQUIRE(topo::apply_pci_overrides(h, *parsed).is_ok());
  REQUIRE(h.devices.size() == 4);
  CHECK(h.devices[0].kind == "gpu");  // only os_names given: the rest as discovered
  CHECK(h.devices[0].pci_switch == gpu_before.pci_switch);
  CHECK(h.devices[0].os_names == std::vector<std::string>{"cuda0"});
  CHECK(h.devices[1].bus_id == "0000:3b:00.0");
  CHECK(h.devices[1].pci_switch == "0000:3a:00.0");
  CHECK(h.devices[1].numa_node == 0);  // was 1
  CHECK(h.devices[1].kind == "nic");
  CHECK(h.devices[3].bus_id == "0000:c1:00.0");
  CHECK(h.devices[3].kind == "nic");
  CHECK(h.devices[3].numa_node == 1);
  CHECK(h.devices[3].os_names == std::vector<std::string>{"rdmap193s0"});

  // An unknown device needs its kind.
  auto unknown = topo::pci_overrides_from_json(
      R"({"version": 1, "devices": [{"bus_id": "0000:99:00.0", "numa_node": 1}]})");
  REQUIRE(unknown.is_ok());
  Status st = topo::apply_pci_overrides(h, *unknown);
  REQUIRE_FALSE(st.is_ok());
  CHECK_THAT(st.message(), Contains("0000:99:00.0") && Contains("\"kind\""));

  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"({"version": 1})", "devices: missing"},
      {R"({"version": 1, "devices": [{"numa_node": 1}]})", "devices[0].bus_id: missing"},
      {R"({"version": 1, "devices": [{"bus_id": "eth0"}]})", "devices[0].bus_id: expected a PCI"},
      {R"({"version": 1, "devices": [{"bus_id": "0000:01:00.0 x"}]})", "devices[0].bus_id"},
      {R"({"version": 1, "devices": [{"bus_id": "0000:01:00.0", "kind": "fpga"}]})",
       "devices[0].kind"},
      {R"({"version": 1, "devices": [{"bus_id": "0000:01:00.0", "numa_node": "0"}]})",
       "devices[0].numa_node: expected an integer"},
      {R"({"version": 1, "devices": [{"bus_id": "0000:01:00.0", "pci_switch": "sw0"}]})",
       "devices[0].pci_switch: expected a PCI address"},
      {R"({"version": 1, "devices": [{"bus_id": "0000:01:00.0", "os_names": "eth0"}]})",
       "devices[0].os_names: expected an array"},
  };
  for (const auto& [text, expected] : bad) {
    INFO(text);
    auto r = topo::pci_overrides_from_json(text);
    REQUIRE_FALSE(r.is_ok());
    CHECK_THAT(r.status().message(), Contains(expected));
  }
  auto missing = topo::read_pci_overrides("/nonexistent/loom-pci.json");
  REQUIRE_FALSE(missing.is_ok());
  CHECK_THAT(missing.status().message(), Contains("/nonexistent/loom-pci.json"));
}
