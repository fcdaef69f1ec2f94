#include "device/ipc_peers.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cstring>

namespace loom::device {
namespace {

// Wire record: u32 pid, i32 device, 64-byte handle, u8 flags, then the host name.
constexpr std::size_t kFixed = 4 + 4 + 64 + 1;
constexpr std::uint8_t kAllowsDirect = 1;

bootstrap::Bytes encode(std::uint32_t pid, std::int32_t device, const IpcHandle& h,
                        std::uint8_t flags, const std::string& host) {
  bootstrap::Bytes b(kFixed + host.size());
  std::memcpy(b.data(), &pid, 4);
  std::memcpy(b.data() + 4, &device, 4);
  std::memcpy(b.data() + 8, h.bytes.data(), 64);
  b[72] = flags;
  std::memcpy(b.data() + kFixed, host.data(), host.size());
  return b;
}

struct Record {
  std::uint32_t pid = 0;
  std::int32_t device = -1;
  IpcHandle handle;
  std::uint8_t flags = 0;
  std::string host;
};

Result<Record> decode(const bootstrap::Bytes& b, int rank) {
  if (b.size() < kFixed)
    return make_error(ErrorCode::Internal, "IPC record of rank {} is {} bytes, too short", rank,
                      b.size());
  Record r;
  std::memcpy(&r.pid, b.data(), 4);
  std::memcpy(&r.device, b.data() + 4, 4);
  std::memcpy(r.handle.bytes.data(), b.data() + 8, 64);
  r.flags = b[72];
  r.host.assign(reinterpret_cast<const char*>(b.data() + kFixed), b.size() - kFixed);
  return r;
}

}  // namespace

std::string_view to_string(PeerRoute r) noexcept {
  switch (r) {
    case PeerRoute::Self: return "self";
    case PeerRoute::PeerToPeer: return "p2p";
    case PeerRoute::HostStaging: return "host-staging";
    case PeerRoute::Remote: return "remote";
  }
  return "?";
}

Result<IpcPeers> IpcPeers::exchange(Device& dev, bootstrap::Store& store, const std::string& prefix,
                                    int rank, int nranks, const std::string& host, int my_device,
                                    void* buffer, Deadline deadline, bool allows_direct) {
  auto ctx = [&](const Status& st) {
    return st.with_context(fmt::format("rank {}: CUDA IPC handle exchange", rank));
  };
  auto handle = dev.ipc_handle(buffer);
  if (!handle.is_ok()) return ctx(handle.status());
  const auto mine = encode(static_cast<std::uint32_t>(::getpid()), my_device, *handle,
                           allows_direct ? kAllowsDirect : 0, host);
  auto all = bootstrap::store_allgather(store, prefix + "ipc/", rank, nranks, mine, deadline);
  if (!all.is_ok()) return ctx(all.status());
  std::vector<Record> records;
  bool everyone_allows = true;
  for (int r = 0; r < nranks; ++r) {
    auto rec = decode((*all)[static_cast<std::size_t>(r)], r);
    if (!rec.is_ok()) return ctx(rec.status());
    everyone_allows = everyone_allows && (rec->flags & kAllowsDirect) != 0;
    records.push_back(std::move(*rec));
  }
  std::vector<PeerBuffer> peers(static_cast<std::size_t>(nranks));
  IpcPeers out(dev, {});
  for (int r = 0; r < nranks; ++r) {
    const Record* rec = &records[static_cast<std::size_t>(r)];
    PeerBuffer& p = peers[static_cast<std::size_t>(r)];
    p.rank = r;
    p.device = rec->device;
    p.allows_direct = (rec->flags & kAllowsDirect) != 0;
    if (r == rank) {
      p.route = PeerRoute::Self;
      p.mapped = buffer;
      continue;
    }
    if (rec->host != host) continue;  // Remote
    // A handle this runtime cannot open (CUDA: our own process's, ranks as threads; host-sim:
    // another process's): stage. Both ranks of the pair compare the same two pids, so both
    // decide alike.
    const bool same_process = rec->pid == static_cast<std::uint32_t>(::getpid());
    if (!dev.ipc_opens(same_process)) {
      p.route = PeerRoute::HostStaging;
      p.why = fmt::format("{} cannot open IPC handles of {} process", dev.name(),
                          same_process ? "its own" : "another");
      continue;
    }
    auto can = dev.can_access_peer(my_device, rec->device);
    if (can.is_ok() && *can) can = dev.can_access_peer(rec->device, my_device);
    if (!can.is_ok()) return ctx(can.status().with_context(fmt::format("peer {}", r)));
    if (!*can) {
      p.route = PeerRoute::HostStaging;
      p.why = my_device == rec->device
                  ? fmt::format("both on device {}", my_device)
                  : fmt::format("no peer access between devices {} and {}", my_device, rec->device);
      continue;
    }
    p.route = PeerRoute::PeerToPeer;
    if (!everyone_allows) continue;  // not mapped: the peers may free their buffers at once
    auto mapped = dev.ipc_open(rec->handle);
    if (!mapped.is_ok())
      return ctx(mapped.status().with_context(
          fmt::format("peer {} (device {}): opening its IPC handle", r, rec->device)));
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
