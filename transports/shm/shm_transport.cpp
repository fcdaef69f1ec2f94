#include "transports/shm/shm_transport.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <span>
#include <string>

#include "common/choice.hpp"
#include "log/log.hpp"

namespace loom::transport::shm {
namespace {

std::span<const std::uint8_t> as_bytes(const std::string& s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

}  // namespace

Result<SlotOrder> parse_slot_order(std::string_view text) {
  return parse_choice<SlotOrder>(
      "LOOM_SHM_SLOT_ORDER", text,
      {{"auto", SlotOrder::Auto}, {"reuse", SlotOrder::Reuse}, {"rotate", SlotOrder::Rotate}});
}

/// The state of one peer's connection while ensure() sets it up.
struct ShmTransport::Handshake {
  int peer = -1;
  CreatedSegment out;  // our sending channel (unlinked once the peer acknowledges it)
  Mapping in;          // the peer's sending channel
  ChannelGeometry in_geometry;
  ShmPeer info;
  bool single_copy_in = false;   // we may read the peer's buffers (our probe succeeded)
  bool single_copy_out = false;  // the peer reads ours
};

Result<std::unique_ptr<ShmTransport>> ShmTransport::create(int rank, int nranks,
                                                           std::uint64_t comm_id,
                                                           std::shared_ptr<bootstrap::Store> store,
                                                           ShmOptions options) {
  if (nranks < 1 || rank < 0 || rank >= nranks || store == nullptr)
    return make_error(ErrorCode::InvalidArgument, "shm transport: invalid rank {} of {}", rank,
                      nranks);
  ChannelGeometry g{round_up(std::max(options.slot_bytes, kMinSlotBytes), kCacheLine),
                    options.nslots};
  if (!valid_geometry(g))
    return make_error(ErrorCode::InvalidUsage,
                      "shm transport: {} slots of {} bytes is outside the limits (slot size {} to "
                      "{} bytes, 1 to {} slots, at most {} bytes per channel); see "
                      "LOOM_SHM_SLOT_SIZE and LOOM_SHM_SLOTS",
                      options.nslots, options.slot_bytes, kMinSlotBytes, kMaxSlotBytes, kMaxSlots,
                      kMaxChannelBytes);
  LOOM_ASSIGN_OR_RETURN(std::shared_ptr<Doorbell> bell, Doorbell::create(comm_id, rank));
  if (options.single_copy != SingleCopy::Off) allow_peer_reads();
  for (const std::string& name : remove_orphaned_channels(comm_id))
    LOOM_LOG_INFO(Shm, "rank {}: removed /dev/shm/{}, left by a process that died during setup",
                  rank, name);
  return std::unique_ptr<ShmTransport>(
      new ShmTransport(rank, nranks, comm_id, std::move(store), g, options, std::move(bell)));
}

ShmTransport::ShmTransport(int rank, int nranks, std::uint64_t comm_id,
                           std::shared_ptr<bootstrap::Store> store, ChannelGeometry geometry,
                           ShmOptions options, std::shared_ptr<Doorbell> doorbell)
    : rank_(rank),
      nranks_(nranks),
      comm_id_(comm_id),
      store_(std::move(store)),
      geometry_(geometry),
      options_(options),
      bell_(std::move(doorbell)),
      conns_(static_cast<std::size_t>(nranks)) {}

ShmTransport::~ShmTransport() = default;

Connection* ShmTransport::get(int peer) const {
  if (peer < 0 || peer >= nranks_) return nullptr;
  return conns_[static_cast<std::size_t>(peer)].get();
}

const std::string& ShmTransport::doorbell_name() const {
  return bell_->name();
}

std::string ShmTransport::key(int from, int to) const {
  return fmt::format("loom/{:016x}/shm/{}-{}", comm_id_, from, to);
}

Status ShmTransport::ensure(const std::vector<int>& peers, Deadline deadline) {
  std::vector<int> sorted = peers;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  std::vector<Handshake> hs;
  hs.reserve(sorted.size());
  for (int p : sorted) {
    if (p < 0 || p >= nranks_ || p == rank_)
      return make_error(ErrorCode::InvalidArgument,
                        "rank {}: cannot connect to rank {} over shm ({} ranks)", rank_, p,
                        nranks_);
    if (get(p) == nullptr) hs.emplace_back().peer = p;
  }
  // Publishing never waits, and each phase only waits for what the peer does in an earlier
  // phase of its own ensure(), so ranks calling ensure() for each other cannot deadlock.
  for (Handshake& h : hs) LOOM_RETURN_IF_ERROR(publish(h));
  for (Handshake& h : hs) LOOM_RETURN_IF_ERROR(open_incoming(h, deadline));
  for (Handshake& h : hs) LOOM_RETURN_IF_ERROR(await_mapped(h, deadline));
  for (Handshake& h : hs) {
    LOOM_LOG_INFO(Shm,
                  "rank {}: connected to rank {} over shm ({} slots of {} bytes each way; single "
                  "copy from {} bytes: reading {}, read by peer {}; an empty channel's next "
                  "payload: {} slot)",
                  rank_, h.peer, geometry_.nslots, geometry_.slot_bytes, options_.single_copy_min,
                  h.single_copy_in ? "yes" : "no", h.single_copy_out ? "yes" : "no",
                  options_.slot_order == SlotOrder::Reuse ? "first" : "next");
    SingleCopyParams sc{h.single_copy_in, h.single_copy_out, options_.single_copy_min};
    conns_[static_cast<std::size_t>(h.peer)] = std::make_unique<ShmConnection>(
        rank_, comm_id_, std::move(h.info), Channel(std::move(h.out.mapping), geometry_),
        Channel(std::move(h.in), h.in_geometry), bell_, sc,
        options_.slot_order == SlotOrder::Reuse);
  }
  return Status::ok();
}

// Creates our sending channel to h.peer and publishes its name and our doorbell's.
Status ShmTransport::publish(Handshake& h) {
  LOOM_ASSIGN_OR_RETURN(std::string nonce, random_hex(16));
  std::string name = fmt::format("/loom-{:016x}-{}-{}-{}", comm_id_, rank_, h.peer, nonce);
  LOOM_ASSIGN_OR_RETURN(h.out, create_segment(name, geometry_.total_bytes()));
  init_channel(h.out.mapping, geometry_, comm_id_, rank_, h.peer);
  return store_->set(key(rank_, h.peer), as_bytes(name + " " + bell_->name()));
}

// Waits for a key `peer` sets, in slices, asking between them whether the peer is known to
// have failed: a rank that left or died before connecting ends the wait at once, not at the
// deadline. (Short gets also leave the shared store connection to the failure monitor.)
Result<bootstrap::Bytes> ShmTransport::wait_for_key(const std::string& k, int peer,
                                                    Deadline deadline) {
  constexpr auto kSlice = std::chrono::milliseconds(100);
  for (;;) {
    auto got = store_->get(k, deadline.earliest(Deadline::after(kSlice)));
    if (got.is_ok() || got.status().code() != ErrorCode::Timeout || deadline.expired()) return got;
    if (peer_check_) LOOM_RETURN_IF_ERROR(peer_check_(peer));
  }
}

// Maps h.peer's sending channel, checks it, unlinks its name and acknowledges it.
Status ShmTransport::open_incoming(Handshake& h, Deadline deadline) {
  auto got = wait_for_key(key(h.peer, rank_), h.peer, deadline);
  if (!got.is_ok())
    return got.status().with_context(fmt::format(
        "rank {}: waiting for rank {} to publish its shared-memory channel (is it running and "
        "calling the same collectives?)",
        rank_, h.peer));
  std::string value(got->begin(), got->end());
  std::size_t space = value.find(' ');
  std::string segment = value.substr(0, space);
  std::string prefix = fmt::format("/loom-{:016x}-{}-{}-", comm_id_, h.peer, rank_);
  if (space == std::string::npos || segment.rfind(prefix, 0) != 0)
    return make_error(ErrorCode::Mismatch,
                      "rank {}: rank {} published a malformed shared-memory channel name", rank_,
                      h.peer);
  LOOM_ASSIGN_OR_RETURN(h.info.doorbell, DoorbellAddress::from_name(value.substr(space + 1)));
  LOOM_ASSIGN_OR_RETURN(h.in, open_segment(segment, ChannelGeometry{kMinSlotBytes, 1}.total_bytes(),
                                           kMaxChannelBytes));
  unlink_segment(segment);  // the creator unlinks it too: whoever comes first
  LOOM_ASSIGN_OR_RETURN(h.in_geometry, check_channel(h.in, comm_id_, h.peer, rank_));
  auto& header = *reinterpret_cast<ChannelHeader*>(h.in.data());
  h.info.rank = h.peer;
  h.info.process = PeerProcess::watch(header.sender_pid, header.sender_pid_ns);
  if (!h.info.process.alive())
    return make_error(ErrorCode::PeerFailed,
                      "rank {}: rank {} (pid {}) exited before its shared-memory connection was "
                      "set up",
                      rank_, h.peer, header.sender_pid);
  LOOM_RETURN_IF_ERROR(bell_->probe(h.info.doorbell, h.peer));
  LOOM_RETURN_IF_ERROR(probe_single_copy(h));
  header.single_copy.store(h.single_copy_in ? 1 : 0, std::memory_order_relaxed);
  header.mapped.store(1, std::memory_order_release);
  return store_->set(key(h.peer, rank_) + "/mapped", as_bytes(segment));
}

// Waits until h.peer has mapped our sending channel, then removes its name.
Status ShmTransport::await_mapped(Handshake& h, Deadline deadline) {
  auto got = wait_for_key(key(rank_, h.peer) + "/mapped", h.peer, deadline);
  if (!got.is_ok())
    return got.status().with_context(fmt::format(
        "rank {}: waiting for rank {} to map our shared-memory channel", rank_, h.peer));
  const auto& header = *reinterpret_cast<const ChannelHeader*>(h.out.mapping.data());
  if (std::string(got->begin(), got->end()) != h.out.name.str() ||
      header.mapped.load(std::memory_order_acquire) != 1)
    return make_error(ErrorCode::Mismatch,
                      "rank {}: rank {} acknowledged a different shared-memory channel (an "
                      "earlier, failed connection attempt?)",
                      rank_, h.peer);
  h.out.name.unlink();
  h.single_copy_out = options_.single_copy != SingleCopy::Off &&
                      header.single_copy.load(std::memory_order_relaxed) != 0;
  return Status::ok();
}

// Tries one single-copy read of the peer's view of the channel header and compares it with
// ours (the same shared memory). LOOM_SHM_SINGLE_COPY=on makes a refusal an error; auto falls
// back to the slot rings.
Status ShmTransport::probe_single_copy(Handshake& h) {
  if (options_.single_copy == SingleCopy::Off) return Status::ok();
  const auto& header = *reinterpret_cast<const ChannelHeader*>(h.in.data());
  Status st;
  if (header.sender_pid_ns != own_pid_namespace() || header.sender_address == 0) {
    st = Status(ErrorCode::SystemError, "the peer is in another pid namespace");
  } else {
    constexpr std::size_t kProbe = offsetof(ChannelHeader, mapped);
    std::array<std::uint8_t, kProbe> got{};
    st = cma_read(header.sender_pid, got.data(), header.sender_address, kProbe, "probe");
    if (st.is_ok() && std::memcmp(got.data(), h.in.data(), kProbe) != 0)
      st = Status(ErrorCode::SystemError, "the probe read returned different bytes");
  }
  if (st.is_ok() && options_.single_copy == SingleCopy::Auto) {
    const CopyRates& rates = measured_copy_rates();
    if (!rates.single_copy_pays())
      st = make_error(ErrorCode::SystemError,
                      "process_vm_readv copies {:.1f} GB/s here, memcpy {:.1f} GB/s: the slot "
                      "rings are faster",
                      rates.single_copy_gbs, rates.memcpy_gbs);
  }
  h.single_copy_in = st.is_ok();
  if (st.is_ok()) return Status::ok();
  if (options_.single_copy == SingleCopy::On)
    return make_error(ErrorCode::InvalidUsage,
                      "rank {}: LOOM_SHM_SINGLE_COPY=on, but reading rank {}'s memory with "
                      "process_vm_readv is not allowed here ({}); check "
                      "/proc/sys/kernel/yama/ptrace_scope and seccomp, or use auto",
                      rank_, h.peer, st.message());
  LOOM_LOG_INFO(Shm,
                "rank {}: single-copy reads from rank {} unavailable ({}); using the slot "
                "rings only",
                rank_, h.peer, st.message());
  return Status::ok();
}

}  // namespace loom::transport::shm
