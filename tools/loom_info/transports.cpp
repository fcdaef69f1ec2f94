#include "transports.hpp"

#include <fmt/format.h>
#include <rdma/fabric.h>
#include <unistd.h>

#include "common/strings.hpp"
#include "core/peer_transports.hpp"
#include "device/device.hpp"
#include "topology/nic_choice.hpp"
#include "transports/ofi/ofi_fabric.hpp"
#include "transports/ofi/ofi_factory.hpp"
#include "transports/tcp/tcp_rails.hpp"

namespace loom::info {
namespace {

std::string shm_line() {
  bool ok = ::access("/dev/shm", W_OK) == 0;
  return fmt::format("  {:<5}{:<13}{}\n", "shm", ok ? "available" : "unavailable",
                     ok ? "peers on this host; shared-memory slot rings, direct load/store, "
                          "fused receive-reduce"
                        : "/dev/shm is not writable");
}

std::string tcp_line(const config::Config& cfg) {
  return fmt::format(
      "  {:<5}{:<13}any peer; {} sockets per peer (LOOM_SOCKETS_PER_PEER), striping from {} B, "
      "{} B socket buffers, host memory\n",
      "tcp", "available",
      cfg.get_int("LOOM_SOCKETS_PER_PEER") == 0
          ? std::string("auto")
          : std::to_string(cfg.get_int("LOOM_SOCKETS_PER_PEER")),
      2 * cfg.get_size("LOOM_SOCKET_STRIPE_MIN"), cfg.get_size("LOOM_SOCKET_BUFFER"));
}

// The interfaces LOOM_SOCKET_IFNAME names, with their addresses, and how many rails they make.
std::string rails_line(const config::Config& cfg) {
  const std::string list = cfg.get_string("LOOM_SOCKET_IFNAME");
  const std::vector<std::string_view> names = comma_tokens(list);
  if (names.empty()) return "";
  auto rails = transport::tcp::extra_rails(cfg);
  if (!rails.is_ok()) return fmt::format("{:<20}error: {}\n", "", rails.status().message());
  std::string each;
  for (std::string_view name : names) {
    auto a = net::interface_address(name);
    each += fmt::format("{}{} {}", each.empty() ? "" : ", ", name,
                        a.is_ok() ? a->to_string().substr(0, a->to_string().rfind(':')) : "?");
  }
  return fmt::format("{:<20}LOOM_SOCKET_IFNAME: {} -> {} rail(s)\n", "", each, names.size());
}

std::string mr_modes(std::uint64_t m) {
  std::string s;
  auto add = [&](std::uint64_t bit, const char* name) {
    if ((m & bit) != 0) s += (s.empty() ? "" : "|") + std::string(name);
  };
  add(FI_MR_LOCAL, "local");
  add(FI_MR_VIRT_ADDR, "virt_addr");
  add(FI_MR_ALLOCATED, "allocated");
  add(FI_MR_PROV_KEY, "prov_key");
  add(FI_MR_HMEM, "hmem");
  return s.empty() ? "none" : s;
}

// What LOOM_OFI_DOMAINS=near would open here: for this process's CPU binding, and for each GPU
// of the device runtime (a rank computing on it). The candidates are near:LIST's, else every
// domain of `provider`.
std::string near_lines(const config::Config& cfg, const std::string& provider) {
  const std::string list = cfg.get_string("LOOM_OFI_DOMAINS");
  std::vector<std::string> candidates = transport::ofi::near_list(list);
  const bool listed = !candidates.empty();
  if (!listed) candidates = transport::ofi::list_domains(provider);
  auto local = topo::discover_local(0, cfg);
  if (candidates.empty() || !local.is_ok()) return "";
  const topo::RankInfo& rank = local->first;
  const topo::HostInfo& host = local->second;
  auto pick = [&](const std::string& gpu) {
    topo::NicChoice c = topo::nearest_nics(host, rank, gpu, candidates);
    return fmt::format("{} ({})", fmt::join(c.names, ","), c.why);
  };
  std::string out = fmt::format("{:<20}LOOM_OFI_DOMAINS=near{} here: {}\n", "",
                                listed ? list.substr(4) : "", pick(""));
  auto dev = device::device_by_name(cfg.get_string("LOOM_DEVICE"));
  if (!dev.is_ok() || *dev == nullptr) return out;
  for (int i = 0; i < (*dev)->device_count(); ++i) {
    auto bus = (*dev)->pci_bus_id(i);
    if (bus.is_ok()) out += fmt::format("{:<22}a rank on GPU {}: {}\n", "", i, pick(*bus));
  }
  return out;
}

std::string ofi_section(const config::Config& cfg) {
  auto version = fi_version();
  std::string out;
  transport::ofi::FabricRequest req;
  req.provider = cfg.get_string("LOOM_OFI_PROVIDER");
  auto chosen = transport::ofi::probe_provider(req);
  if (chosen.is_ok()) {
    out += fmt::format("  {:<5}{:<13}libfabric {}.{}; provider {} ({}); any peer; {}\n", "ofi",
                       "available", FI_MAJOR(version), FI_MINOR(version), chosen->provider,
                       chosen->provider == "efa" ? "EFA" : "no EFA on this host",
                       chosen->hmem ? "host and device memory (FI_HMEM)" : "host memory");
    out += near_lines(cfg, chosen->provider);
  } else {
    out += fmt::format("  {:<5}{:<13}{}\n", "ofi", "unavailable", chosen.status().message());
  }
  auto providers = transport::ofi::list_providers();
  out += "\nlibfabric providers with tagged reliable-datagram endpoints (best first):\n";
  if (providers.empty()) out += "  none\n";
  for (const auto& p : providers)
    out += fmt::format("  {:<14}fabric {}, domain {}; mr_mode {}; {}; inject {} B\n", p.provider,
                       p.fabric, p.domain, mr_modes(p.mr_mode),
                       p.hmem ? "FI_HMEM (device memory)" : "host memory only", p.inject_size);
  return out;
}

// GPUs of the device runtime LOOM_DEVICE names, and for each pair peer access and the link.
std::string cuda_ipc_section(const config::Config& cfg) {
  const std::string name = cfg.get_string("LOOM_DEVICE");
  auto dev = device::device_by_name(name);
  if (!dev.is_ok() || *dev == nullptr)
    return fmt::format("  {:<9}{:<13}{}\n", "cuda_ipc", "unavailable",
                       dev.is_ok()
                           ? fmt::format("no device runtime (LOOM_DEVICE={}: no GPU visible "
                                         "or loom built without CUDA)",
                                         name)
                           : dev.status().message());
  device::Device& d = **dev;
  std::string out = fmt::format("  {:<9}{:<13}{} ({}), {} GPU(s); device buffers on this host\n",
                                "cuda_ipc", "available", d.name(), name, d.device_count());
  std::vector<std::string> bus(static_cast<std::size_t>(d.device_count()));
  for (int i = 0; i < d.device_count(); ++i) {
    auto id = d.pci_bus_id(i);
    bus[static_cast<std::size_t>(i)] = id.is_ok() ? *id : "?";
    out += fmt::format("    GPU {} at {}\n", i, bus[static_cast<std::size_t>(i)]);
  }
  const std::string nvml = cfg.get_string("LOOM_NVML_LIBRARY");
  for (int i = 0; i < d.device_count(); ++i)
    for (int j = i + 1; j < d.device_count(); ++j) {
      auto can = d.can_access_peer(i, j);
      out += fmt::format(
          "    GPU {} <-> GPU {}: {}, link {}\n", i, j,
          !can.is_ok() ? can.status().message()
          : *can       ? "peer access"
                       : "no peer access",
          d.peer_link(bus[static_cast<std::size_t>(i)], bus[static_cast<std::size_t>(j)], nvml));
    }
  return out;
}

}  // namespace

std::string transports_report(const config::Config& config) {
  std::string out = "Transports on this host:\n";
  out += shm_line();
  out += tcp_line(config);
  out += rails_line(config);
  out += ofi_section(config);
  out += "\nDevice memory (LOOM_DEVICE):\n";
  out += cuda_ipc_section(config);
  net::SocketAddress any;
  auto local = net::resolve("127.0.0.1:0");
  if (local.is_ok()) any = *local;
  std::string text = config.get_string("LOOM_TRANSPORTS");
  auto list = detail::effective_transports(0, config, any);
  out += fmt::format("\nLOOM_TRANSPORTS='{}' -> {}\n", text,
                     list.is_ok() ? "allow list " + *list : "error: " + list.status().message());
  out +=
      "(shm serves peers on the same host; the first other transport in the list that both "
      "ranks allow serves the rest.)\n";
  return out;
}

}  // namespace loom::info
