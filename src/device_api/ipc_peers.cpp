#include "device_api/ipc_peers.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "common/strings.hpp"

namespace loom::device {
namespace {

// Wire record: u32 pid, i32 device, 64-byte handle, u8 flags, then three strings each behind a
// u16 length: host, bus id, the visible bus ids joined by ','.
constexpr std::size_t kFixed = 4 + 4 + 64 + 1;
constexpr std::uint8_t kAllowsDirect = 1;
constexpr std::uint8_t kStages = 2;

void put_string(bootstrap::Bytes& b, const std::string& s) {
  const auto n = static_cast<std::uint16_t>(std::min<std::size_t>(s.size(), 0xffff));
  const std::size_t at = b.size();
  b.resize(at + 2 + n);
  std::memcpy(b.data() + at, &n, 2);
  std::memcpy(b.data() + at + 2, s.data(), n);
}

bool get_string(const bootstrap::Bytes& b, std::size_t& at, std::string& out) {
  std::uint16_t n = 0;
  if (b.size() < at + 2) return false;
  std::memcpy(&n, b.data() + at, 2);
  if (b.size() < at + 2 + n) return false;
  out.assign(reinterpret_cast<const char*>(b.data() + at + 2), n);
  at += 2 + n;
  return true;
}

bool contains(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

Result<IpcRecord> my_record(Device& dev, const std::string& host, int my_device, void* buffer,
                            bool allows_direct, bool stages) {
  IpcRecord r;
  r.pid = static_cast<std::uint32_t>(::getpid());
  r.device = my_device;
  LOOM_ASSIGN_OR_RETURN(r.handle, dev.ipc_handle(buffer));
  r.allows_direct = allows_direct;
  r.stages = stages;
  r.host = host;
  LOOM_ASSIGN_OR_RETURN(r.bus_id, dev.pci_bus_id(my_device));
  for (int d = 0; d < dev.device_count(); ++d) {
    LOOM_ASSIGN_OR_RETURN(std::string id, dev.pci_bus_id(d));
    r.visible.push_back(std::move(id));
  }
  return r;
}

}  // namespace

bootstrap::Bytes encode(const IpcRecord& r) {
  bootstrap::Bytes b(kFixed);
  std::memcpy(b.data(), &r.pid, 4);
  std::memcpy(b.data() + 4, &r.device, 4);
  std::memcpy(b.data() + 8, r.handle.bytes.data(), 64);
  b[72] =
      static_cast<std::uint8_t>((r.allows_direct ? kAllowsDirect : 0) | (r.stages ? kStages : 0));
  std::string visible;
  for (const auto& v : r.visible) visible += (visible.empty() ? "" : ",") + v;
  put_string(b, r.host);
  put_string(b, r.bus_id);
  put_string(b, visible);
  return b;
}

Result<IpcRecord> decode_ipc_record(const bootstrap::Bytes& b, int rank) {
  IpcRecord r;
  std::string visible;
  std::size_t at = kFixed;
  if (b.size() < kFixed || !get_string(b, at, r.host) || !get_string(b, at, r.bus_id) ||
      !get_string(b, at, visible) || at != b.size())
    return make_error(ErrorCode::Internal, "IPC record of rank {} is malformed ({} bytes)", rank,
                      b.size());
  std::memcpy(&r.pid, b.data(), 4);
  std::memcpy(&r.device, b.data() + 4, 4);
  std::memcpy(r.handle.bytes.data(), b.data() + 8, 64);
  r.allows_direct = (b[72] & kAllowsDirect) != 0;
  r.stages = (b[72] & kStages) != 0;
  for (std::string_view v : comma_tokens(visible)) r.visible.emplace_back(v);
  return r;
}

std::string_view to_string(PeerRoute r) noexcept {
  switch (r) {
    case PeerRoute::Self: return "self";
    case PeerRoute::PeerToPeer: return "p2p";
    case PeerRoute::HostStaging: return "host-staging";
    case PeerRoute::Remote: return "remote";
  }
  return "?";
}

namespace {

// The route to a peer on this host, alike on both ranks of the pair: both compare the same two
// pids, bus ids and visibility lists, and probe peer access of the same two GPUs.
Status choose_route(Device& dev, const IpcRecord& mine, const IpcRecord& rec, PeerBuffer& p) {
  // A handle this runtime cannot open (CUDA: our own process's, ranks as threads; host-sim:
  // another process's): stage.
  const bool same_process = rec.pid == mine.pid;
  p.route = PeerRoute::HostStaging;
  if (!dev.ipc_opens(same_process)) {
    p.why = fmt::format("{} cannot open IPC handles of {} process", dev.name(),
                        same_process ? "its own" : "another");
    return Status::ok();
  }
  if (mine.stages || rec.stages) {
    p.why = fmt::format("LOOM_CUDA_IPC_ROUTE=staged on {}", mine.stages && rec.stages ? "both ranks"
                                                            : mine.stages             ? "this rank"
                                                                                      : "the peer");
    return Status::ok();
  }
  if (rec.bus_id == mine.bus_id) {    // another process's memory on our own GPU: no peer access
    p.route = PeerRoute::PeerToPeer;  // needed, its handle opens as a pointer on this device
    p.why = fmt::format("both on GPU {}", mine.bus_id);
    return Status::ok();
  }
  if (!contains(mine.visible, rec.bus_id) || !contains(rec.visible, mine.bus_id)) {
    p.why = fmt::format(
        "GPUs {} and {} do not both see each other (CUDA_VISIBLE_DEVICES differs), so peer "
        "access cannot be set up",
        mine.bus_id, rec.bus_id);
    return Status::ok();
  }
  const int peer_device = dev.device_of_bus_id(rec.bus_id);
  auto can = dev.can_access_peer(mine.device, peer_device);
  if (can.is_ok() && *can) can = dev.can_access_peer(peer_device, mine.device);
  if (!can.is_ok()) return can.status();
  if (!*can) {
    p.why = fmt::format("no peer access between GPUs {} and {}", mine.bus_id, rec.bus_id);
    return Status::ok();
  }
  p.route = PeerRoute::PeerToPeer;
  return Status::ok();
}

}  // namespace

Result<IpcPeers> IpcPeers::exchange(Device& dev, bootstrap::Store& store, const std::string& prefix,
                                    int rank, int nranks, const std::string& host, int my_device,
                                    void* buffer, Deadline deadline, bool allows_direct,
                                    bool stages) {
  auto ctx = [&](const Status& st) {
    return st.with_context(fmt::format("rank {}: CUDA IPC handle exchange", rank));
  };
  auto mine = my_record(dev, host, my_device, buffer, allows_direct, stages);
  if (!mine.is_ok()) return ctx(mine.status());
  auto all =
      bootstrap::store_allgather(store, prefix + "ipc/", rank, nranks, encode(*mine), deadline);
  if (!all.is_ok()) return ctx(all.status());
  std::vector<IpcRecord> records;
  bool everyone_allows = true;
  for (int r = 0; r < nranks; ++r) {
    auto rec = decode_ipc_record((*all)[static_cast<std::size_t>(r)], r);
    if (!rec.is_ok()) return ctx(rec.status());
    everyone_allows = everyone_allows && rec->allows_direct;
    records.push_back(std::move(*rec));
  }
  std::vector<PeerBuffer> peers(static_cast<std::size_t>(nranks));
  IpcPeers out(dev, {});
  for (int r = 0; r < nranks; ++r) {
    const IpcRecord& rec = records[static_cast<std::size_t>(r)];
    PeerBuffer& p = peers[static_cast<std::size_t>(r)];
    p.rank = r;
    p.device = rec.device;
    p.bus_id = rec.bus_id;
    p.allows_direct = rec.allows_direct;
    if (r == rank) {
      p.route = PeerRoute::Self;
      p.mapped = buffer;
      continue;
    }
    if (rec.host != host) continue;  // Remote
    if (Status st = choose_route(dev, *mine, rec, p); !st.is_ok())
      return ctx(st.with_context(fmt::format("peer {}", r)));
    if (p.route != PeerRoute::PeerToPeer || !everyone_allows)
      continue;  // not mapped: the peers may free their buffers at once
    auto mapped = dev.ipc_open(rec.handle);
    if (!mapped.is_ok())
      return ctx(mapped.status().with_context(
          fmt::format("peer {} (GPU {}): opening its IPC handle", r, rec.bus_id)));
    p.mapped = *mapped;
    out.peers_ = peers;  // keep what is mapped so far owned (closed on an early return)
  }
  out.peers_ = std::move(peers);
  return out;
}

IpcPeers::~IpcPeers() {
  if (!dev_) return;
  for (const auto& p : peers_)
    if (p.route == PeerRoute::PeerToPeer && p.mapped) dev_->ipc_close(p.mapped);
}

}  // namespace loom::device
