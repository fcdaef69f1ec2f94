#include "transports/cuda_ipc/cuda_ipc_transport.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <new>

#include "log/log.hpp"

namespace loom::transport::cuda_ipc {
namespace {

bootstrap::Bytes as_bytes(const std::string& s) {
  return {s.begin(), s.end()};
}

constexpr auto kTeardownTimeout = std::chrono::seconds(10);

}  // namespace

std::string describe_route(int rank, int peer, const device::PeerBuffer& p, int my_device,
                           const std::string& link) {
  switch (p.route) {
    case device::PeerRoute::PeerToPeer:
      return fmt::format(
          "rank {}: device buffers to rank {} via cuda_ipc (p2p: device {} -> rank {}'s device "
          "{} (GPU {}), link {})",
          rank, peer, my_device, peer, p.device, p.bus_id, link);
    case device::PeerRoute::HostStaging:
      return fmt::format(
          "rank {}: device buffers to rank {} via cuda_ipc (host-staging: {}; pinned host "
          "shared memory)",
          rank, peer, p.why);
    case device::PeerRoute::Self:
    case device::PeerRoute::Remote: break;
  }
  return fmt::format("rank {}: device buffers to rank {} via {}", rank, peer,
                     device::to_string(p.route));
}

CudaIpcTransport::CudaIpcTransport(const CudaIpcSetup& setup, int my_device)
    : dev_(*setup.dev),
      store_(setup.store),
      prefix_(setup.prefix),
      comm_id_(setup.comm_id),
      rank_(setup.rank),
      nranks_(setup.nranks),
      my_device_(my_device),
      slot_bytes_(setup.slot_bytes),
      local_index_(static_cast<std::size_t>(setup.nranks), -1),
      peers_(static_cast<std::size_t>(setup.nranks)) {
  int next = 0;
  for (std::size_t r = 0; r < local_index_.size(); ++r)
    if (setup.host_ids.empty() || setup.host_ids[r] == setup.host_id) local_index_[r] = next++;
}

std::size_t CudaIpcTransport::fifo_offset(int to) const {
  return static_cast<std::size_t>(local_index_[static_cast<std::size_t>(to)]) * fifo_bytes();
}

Result<std::unique_ptr<CudaIpcTransport>> CudaIpcTransport::create(const CudaIpcSetup& setup,
                                                                   Deadline deadline) {
  device::Device& dev = *setup.dev;
  if (setup.slot_bytes == 0 || setup.slot_bytes % kSlotAlign != 0 ||
      setup.slot_bytes > kMaxSlotBytes)
    return make_error(ErrorCode::InvalidArgument,
                      "rank {}: LOOM_CUDA_IPC_SLOT_SIZE={} is not a multiple of {} up to {}",
                      setup.rank, setup.slot_bytes, kSlotAlign, kMaxSlotBytes);
  LOOM_ASSIGN_OR_RETURN(int my_device, dev.current_device());
  std::unique_ptr<CudaIpcTransport> t(new CudaIpcTransport(setup, my_device));
  LOOM_ASSIGN_OR_RETURN(t->stream_, dev.create_stream());
  if (setup.nranks == 1) return t;
  const std::size_t local = static_cast<std::size_t>(
      std::count_if(t->local_index_.begin(), t->local_index_.end(), [](int i) { return i >= 0; }));
  const std::size_t bytes = local * t->fifo_bytes();
  LOOM_ASSIGN_OR_RETURN(t->fifo_memory_, dev.alloc(bytes));
  LOOM_ASSIGN_OR_RETURN(auto peers, device::IpcPeers::exchange(
                                        dev, *setup.store, setup.prefix + "cuda_ipc/", setup.rank,
                                        setup.nranks, setup.host_id, my_device, t->fifo_memory_,
                                        deadline, setup.allowed, setup.stages));
  for (int r = 0; r < setup.nranks; ++r) {
    if (peers.peer(r).allows_direct) continue;
    if (setup.peer_read == PeerReadMode::On)
      return make_error(ErrorCode::InvalidUsage,
                        "rank {}: LOOM_CUDA_IPC_PEER_READ=on, but rank {} excludes cuda_ipc "
                        "(LOOM_TRANSPORTS)",
                        setup.rank, r);
    LOOM_LOG_INFO(Cuda,
                  "rank {}: rank {} excludes cuda_ipc (LOOM_TRANSPORTS): device buffers stage "
                  "through pinned host memory and the host transports",
                  setup.rank, r);
    return std::unique_ptr<CudaIpcTransport>();
  }
  for (int r = 0; r < setup.nranks; ++r) {
    const device::PeerBuffer& p = peers.peer(r);
    if (r == setup.rank || p.route == device::PeerRoute::Remote) continue;
    const std::string link =
        p.route == device::PeerRoute::PeerToPeer
            ? dev.peer_link(peers.peer(setup.rank).bus_id, p.bus_id, setup.nvml_library)
            : std::string();
    LOOM_LOG_INFO(Cuda, "{}", describe_route(setup.rank, r, p, my_device, link));
  }
  t->ipc_.emplace(std::move(peers));
  BoardSetup b;
  b.dev = &dev;
  b.store = setup.store.get();
  b.prefix = setup.prefix;
  b.comm_id = setup.comm_id;
  b.rank = setup.rank;
  b.nranks = setup.nranks;
  b.mode = setup.peer_read;
  b.peers = setup.host_ids.empty() ? &*t->ipc_ : nullptr;  // one host only
  b.deadline = deadline;
  LOOM_ASSIGN_OR_RETURN(t->board_, ShmPeerBoard::agree(b));
  return t;
}

CudaIpcTransport::~CudaIpcTransport() {
  for (Peer& p : peers_) p.conn.reset();  // marks the FIFOs closed
  if (stream_) {
    Status st = dev_.synchronize(stream_, Deadline::after(kTeardownTimeout));
    if (!st.is_ok()) LOOM_LOG_ERROR(Cuda, "rank {}: cuda_ipc teardown: {}", rank_, st.message());
  }
  board_.reset();  // the stream no longer uses its words
  for (Peer& p : peers_) {
    if (p.out_registered) dev_.host_unregister(p.out.mapping.data() + kControlBytes);
    if (p.in_registered) dev_.host_unregister(p.in.data() + kControlBytes);
  }
  peers_.clear();
  ipc_.reset();  // closes the peers' mapped FIFOs
  if (fifo_memory_) dev_.free(fifo_memory_);
  if (stream_) dev_.destroy_stream(stream_);
}

std::string CudaIpcTransport::key(int from, int to) const {
  return fmt::format("{}cuda_ipc/fifo/{}-{}", prefix_, from, to);
}

device::PeerRoute CudaIpcTransport::route(int peer) const {
  if (peer == rank_) return device::PeerRoute::Self;
  return ipc_ ? ipc_->peer(peer).route : device::PeerRoute::Remote;
}

Connection* CudaIpcTransport::get(int peer) const {
  if (peer < 0 || peer >= nranks_) return nullptr;
  return peers_[static_cast<std::size_t>(peer)].conn.get();
}

Status CudaIpcTransport::ensure(const std::vector<int>& peers, Deadline deadline) {
  std::vector<int> todo;
  for (int p : peers)
    if (p != rank_ && !get(p)) todo.push_back(p);
  for (int p : todo) LOOM_RETURN_IF_ERROR(publish(p));
  for (int p : todo) LOOM_RETURN_IF_ERROR(open_incoming(p, deadline));
  return Status::ok();
}

// Creates our FIFO's control block to `peer` (and the staged data, without peer access) in a
// new shared-memory segment and publishes its name.
Status CudaIpcTransport::publish(int peer) {
  const device::PeerRoute r = route(peer);
  if (r != device::PeerRoute::PeerToPeer && r != device::PeerRoute::HostStaging)
    return make_error(ErrorCode::Internal, "rank {}: cuda_ipc cannot reach rank {} (route {})",
                      rank_, peer, device::to_string(r));
  Peer& p = peers_[static_cast<std::size_t>(peer)];
  LOOM_ASSIGN_OR_RETURN(std::string nonce, shm::random_hex(8));
  const std::string name = fmt::format("/loom-cipc-{:016x}-{}-{}-{}", comm_id_, rank_, peer, nonce);
  const bool staged = r == device::PeerRoute::HostStaging;
  LOOM_ASSIGN_OR_RETURN(p.out,
                        shm::create_segment(name, kControlBytes + (staged ? fifo_bytes() : 0)));
  new (p.out.mapping.data()) ControlBlock();
  if (staged) {
    LOOM_ASSIGN_OR_RETURN(p.out_registered,
                          dev_.host_register(p.out.mapping.data() + kControlBytes, fifo_bytes()));
  }
  // name (with its owner tag), then our slot size: a peer checks the slots before it maps
  return store_->set(key(rank_, peer),
                     as_bytes(fmt::format("{} {}", p.out.name.str(), slot_bytes_)));
}

// Maps `peer`'s FIFO to us and creates the connection.
Status CudaIpcTransport::open_incoming(int peer, Deadline deadline) {
  auto got = store_->get(key(peer, rank_), deadline);
  if (!got.is_ok())
    return got.status().with_context(fmt::format(
        "rank {}: waiting for rank {} to publish its cuda_ipc FIFO (is it calling the same "
        "collective on device buffers?)",
        rank_, peer));
  const std::string value(got->begin(), got->end());
  const std::size_t space = value.rfind(' ');
  const std::string name = value.substr(0, space);
  LOOM_RETURN_IF_ERROR(check_slot_size(
      peer,
      space == std::string::npos ? 0 : std::strtoull(value.c_str() + space + 1, nullptr, 10)));
  const std::string expect = fmt::format("/loom-cipc-{:016x}-{}-{}-", comm_id_, peer, rank_);
  if (name.rfind(expect, 0) != 0)
    return make_error(ErrorCode::Mismatch, "rank {}: rank {} published a malformed FIFO name",
                      rank_, peer);
  Peer& p = peers_[static_cast<std::size_t>(peer)];
  const bool staged = route(peer) == device::PeerRoute::HostStaging;
  const std::size_t bytes = kControlBytes + (staged ? fifo_bytes() : 0);
  LOOM_ASSIGN_OR_RETURN(p.in, shm::open_segment(name, bytes, bytes));
  shm::unlink_segment(name);  // the creator unlinks it too: whoever comes first
  FifoPair f;
  f.seen_failure = &seen_failure_;
  f.slot_bytes = slot_bytes_;
  f.out_control = reinterpret_cast<ControlBlock*>(p.out.mapping.data());
  f.in_control = reinterpret_cast<ControlBlock*>(p.in.data());
  if (staged) {
    LOOM_ASSIGN_OR_RETURN(p.in_registered,
                          dev_.host_register(p.in.data() + kControlBytes, fifo_bytes()));
    f.out_data = static_cast<std::uint8_t*>(p.out_registered);
    f.in_data = static_cast<const std::uint8_t*>(p.in_registered);
  } else {
    f.out_data = static_cast<std::uint8_t*>(fifo_memory_) + fifo_offset(peer);
    f.in_data = static_cast<const std::uint8_t*>(ipc_->peer(peer).mapped) + fifo_offset(rank_);
  }
  LOOM_ASSIGN_OR_RETURN(p.conn,
                        CudaIpcConnection::create(dev_, stream_, rank_, peer, route(peer), f));
  return Status::ok();
}

// Both ends of a FIFO cut messages alike, and the p2p route finds its FIFO in the peer's memory
// at an offset of whole FIFOs: the peer's slots must be ours.
Status CudaIpcTransport::check_slot_size(int peer, std::size_t peer_slot_bytes) const {
  if (peer_slot_bytes == slot_bytes_) return Status::ok();
  return make_error(ErrorCode::Mismatch,
                    "rank {}: rank {}'s cuda_ipc FIFO slots are {} bytes, this rank's {} "
                    "(set LOOM_CUDA_IPC_SLOT_SIZE alike on every rank)",
                    rank_, peer, peer_slot_bytes, slot_bytes_)
      .with_peer(peer);
}

}  // namespace loom::transport::cuda_ipc
