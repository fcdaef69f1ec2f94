#include "core/device_network.hpp"

#include "common/choice.hpp"
#include "device/net_buffers.hpp"
#include "log/log.hpp"

namespace loom::detail {
namespace {

constexpr std::size_t kProbeBytes = 4096;

// Registers a small device allocation the way collectives will register theirs.
NetDeviceVote probe(device::Device& dev, transport::Transport& net, NetDeviceVote yes) {
  auto buf = dev.alloc(kProbeBytes);
  if (!buf.is_ok()) return {false, "allocating a probe buffer: " + buf.status().message()};
  NetDeviceVote out = std::move(yes);
  if (dev.allocation_id(*buf) == 0) {
    out = {false, fmt::format("device runtime {} cannot tell allocations apart "
                              "(CU_POINTER_ATTRIBUTE_BUFFER_ID), so registrations of device memory "
                              "could not be cached safely",
                              dev.name())};
  } else {
    auto ordinal = dev.current_device();
    Status st =
        net.enable_device_memory(dev.name(), *buf, kProbeBytes, ordinal.is_ok() ? *ordinal : 0);
    if (!st.is_ok()) out = {false, st.message()};
  }
  dev.free(*buf);
  return out;
}

}  // namespace

Result<OfiHmemMode> parse_ofi_hmem(std::string_view text) {
  return parse_choice<OfiHmemMode>("LOOM_OFI_HMEM", text,
                                   {{"auto", OfiHmemMode::Auto},
                                    {"off", OfiHmemMode::Off},
                                    {"simulate", OfiHmemMode::Simulate}});
}

NetDeviceVote vote_network_device(device::Device& dev, PeerTransports& transports,
                                  const std::vector<std::string>& host_ids, int rank,
                                  OfiHmemMode mode) {
  if (mode == OfiHmemMode::Off) return {false, "LOOM_OFI_HMEM=off"};
  const auto me = static_cast<std::size_t>(rank);
  for (std::size_t p = 0; p < host_ids.size(); ++p) {
    if (host_ids[p] == host_ids[me]) continue;
    const TransportKind k = transports.kind(static_cast<int>(p));
    if (k != TransportKind::Ofi)
      return {false, fmt::format("it reaches rank {} (another host) over {}, and device buffers "
                                 "cross hosts from device memory only over ofi",
                                 p, to_string(k))};
  }
  transport::Transport* ofi = transports.transport(TransportKind::Ofi);
  const auto support = ofi ? ofi->device_memory_support() : std::nullopt;
  if (!support) return {false, "no ofi transport"};
  auto d = device::decide_net_buffer(device::MemoryKind::Device, dev.name(), support->provider,
                                     support->registers, mode == OfiHmemMode::Simulate);
  if (d.action != device::NetBufferAction::RegisterDevice) return {false, d.reason};
  return probe(dev, *ofi, {true, d.reason});
}

Result<bool> agree_network_device(bootstrap::Store& store, const std::string& prefix, int rank,
                                  int nranks, const NetDeviceVote& mine, Deadline deadline) {
  bootstrap::Bytes b(1 + mine.why.size());
  b[0] = mine.can ? 1 : 0;
  std::copy(mine.why.begin(), mine.why.end(), b.begin() + 1);
  auto all = bootstrap::store_allgather(store, prefix + "netdev/", rank, nranks, b, deadline);
  if (!all.is_ok())
    return all.status().with_context(
        fmt::format("rank {}: agreeing how device buffers cross hosts", rank));
  for (int r = 0; r < nranks; ++r) {
    const bootstrap::Bytes& v = (*all)[static_cast<std::size_t>(r)];
    if (!v.empty() && v[0] == 1) continue;
    const std::string why = v.empty() ? "?" : std::string(v.begin() + 1, v.end());
    LOOM_LOG_INFO(Cuda,
                  "rank {}: device buffers cross hosts through pinned host staging: rank {} "
                  "cannot send them from device memory ({})",
                  rank, r, why);
    return false;
  }
  LOOM_LOG_INFO(Cuda,
                "rank {}: device buffers cross hosts from device memory over ofi (FI_HMEM): {}",
                rank, mine.why);
  return true;
}

}  // namespace loom::detail
