#include "transports/shm/shm_transport.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <csignal>
#include <cstddef>
#include <cstring>
#include <span>
#include <string>
#include <thread>

#include "common/choice.hpp"
#include "log/log.hpp"
#include "transports/shm/shm_card.hpp"

namespace loom::transport::shm {
Result<SegmentKind> parse_segment_kind(std::string_view text) {
  return parse_choice<SegmentKind>(
      "LOOM_SHM_SEGMENTS", text,
      {{"auto", SegmentKind::Auto}, {"memfd", SegmentKind::Memfd}, {"named", SegmentKind::Named}});
}

Result<SlotOrder> parse_slot_order(std::string_view text) {
  return parse_choice<SlotOrder>(
      "LOOM_SHM_SLOT_ORDER", text,
      {{"auto", SlotOrder::Auto}, {"reuse", SlotOrder::Reuse}, {"rotate", SlotOrder::Rotate}});
}

/// The state of one peer's connection while ensure() sets it up.
struct ShmTransport::Handshake {
  int peer = -1;
  std::string nonce;   // names our sending channel (published on our card)
  Card card;           // the peer's
  bool by_fd = false;  // both sides have mailboxes: channels travel as descriptors
  CreatedSegment out;  // our sending channel (a name is unlinked once the peer acknowledges it)
  std::string out_id;  // names our sending channel: "memfd:<nonce>" or the segment's name
  Mapping in;          // the peer's sending channel
  std::string in_id;
  ChannelGeometry in_geometry;
  ShmPeer info;
  std::uint32_t single_copy_in = kReadsNone;   // what we read in place (SingleCopyReads)
  std::uint32_t single_copy_out = kReadsNone;  // what the peer reads in place
  bool maps_in = false;   // we may map the peer's shared buffers (our probe read succeeded)
  bool maps_out = false;  // the peer maps ours
  // Both channels acknowledged: the peer's setup is complete, so it may complete the operation it
  // connected for and exit before ours is (its last call), which is no failure.
  bool acked = false;       // we acknowledged the peer's channel
  bool peer_acked = false;  // the peer acknowledged ours
  [[nodiscard]] bool done() const { return acked && peer_acked; }
};

namespace {

const char* describe_reads(std::uint32_t reads) {
  if (reads == kReadsNone) return "no";
  if ((reads & kReadsReductions) == 0) return "copies only";
  return "yes";
}

// Anonymous segments need memfd_create and a mailbox; auto falls back to named segments (logged)
// where either is refused.
Result<std::unique_ptr<FdMailbox>> open_mailbox(std::uint64_t comm_id, int rank,
                                                const ShmOptions& options) {
  if (options.segments == SegmentKind::Named) return std::unique_ptr<FdMailbox>();
  Status why = anonymous_segments_available()
                   ? Status::ok()
                   : Status(ErrorCode::SystemError, "memfd_create is refused here");
  if (why.is_ok()) {
    auto box = FdMailbox::open(comm_id, rank);
    if (box.is_ok()) return box;
    why = box.status();
  }
  if (options.segments == SegmentKind::Memfd)
    return make_error(ErrorCode::InvalidUsage,
                      "rank {}: LOOM_SHM_SEGMENTS=memfd, but anonymous segments cannot be handed "
                      "over here ({}); use auto or named",
                      rank, why.message());
  LOOM_LOG_INFO(Shm,
                "rank {}: anonymous shared memory unavailable ({}): using named /dev/shm "
                "segments",
                rank, why.message());
  return std::unique_ptr<FdMailbox>();
}

}  // namespace

void remove_orphans(int rank, std::uint64_t comm_id) {
  for (const std::string& name : remove_orphaned_channels(comm_id))
    LOOM_LOG_INFO(Shm, "rank {}: removed /dev/shm/{}, left by a process that is gone", rank, name);
}

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
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<FdMailbox> mailbox, open_mailbox(comm_id, rank, options));
  if (options.single_copy != SingleCopy::Off) allow_peer_reads();
  remove_orphans(rank, comm_id);
  LOOM_LOG_INFO(Shm, "rank {}: shm transport of communicator {:016x}: channels travel as {}", rank,
                comm_id, mailbox ? "anonymous segments (memfd)" : "named /dev/shm segments");
  return std::unique_ptr<ShmTransport>(new ShmTransport(
      rank, nranks, comm_id, std::move(store), g, options, std::move(bell), std::move(mailbox)));
}

ShmTransport::ShmTransport(int rank, int nranks, std::uint64_t comm_id,
                           std::shared_ptr<bootstrap::Store> store, ChannelGeometry geometry,
                           ShmOptions options, std::shared_ptr<Doorbell> doorbell,
                           std::unique_ptr<FdMailbox> mailbox)
    : rank_(rank),
      nranks_(nranks),
      comm_id_(comm_id),
      store_(std::move(store)),
      geometry_(geometry),
      options_(options),
      bell_(std::move(doorbell)),
      mailbox_(std::move(mailbox)),
      conns_(static_cast<std::size_t>(nranks)),
      cards_(static_cast<std::size_t>(nranks)) {}

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

std::string ShmTransport::card_key(int rank) const {
  return fmt::format("loom/{:016x}/shm/card/{}", comm_id_, rank);
}

Status ShmTransport::known_failure(int peer) const {
  // While a communicator is created it asks the store (a GONE); the waits here watch the peers'
  // processes locally far more often, and the store ends its own waits when a client vanishes.
  constexpr auto kEvery = std::chrono::seconds(5);
  if (!peer_check_) return Status::ok();
  const auto now = std::chrono::steady_clock::now();
  if (now - peer_checked_ < kEvery) return Status::ok();
  peer_checked_ = now;
  return peer_check_(peer);
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
  if (Status st = connect_all(hs, deadline); !st.is_ok()) {
    hs.clear();  // unlinks what this call named
    if (st.code() == ErrorCode::PeerFailed) remove_orphans(rank_, comm_id_);
    return st;
  }
  for (Handshake& h : hs) {
    LOOM_LOG_INFO(Shm,
                  "rank {}: connected to rank {} over shm ({} slots of {} bytes each way; single "
                  "copy from {} bytes: reading {}, read by peer {}, shared buffers mapped {}, "
                  "mapped by peer {}; an empty channel's next payload: {} slot)",
                  rank_, h.peer, geometry_.nslots, geometry_.slot_bytes, options_.single_copy_min,
                  describe_reads(h.single_copy_in), describe_reads(h.single_copy_out),
                  h.maps_in ? "yes" : "no", h.maps_out ? "yes" : "no",
                  options_.slot_order == SlotOrder::Reuse ? "first" : "next");
    SingleCopyParams sc{h.single_copy_in != kReadsNone, h.single_copy_out, options_.single_copy_min,
                        options_.single_copy_max,       h.maps_in,         h.maps_out};
    conns_[static_cast<std::size_t>(h.peer)] = std::make_unique<ShmConnection>(
        rank_, std::move(h.info), Channel(std::move(h.out.mapping), geometry_),
        Channel(std::move(h.in), h.in_geometry), bell_, sc,
        options_.slot_order == SlotOrder::Reuse);
  }
  return Status::ok();
}

// Publishing never waits, and each phase only waits for what the peer does in an earlier phase
// of its own ensure(), so ranks calling ensure() for each other cannot deadlock.
Status ShmTransport::connect_all(std::vector<Handshake>& hs, Deadline deadline) {
  setting_up_ = &hs;
  struct Done {
    const std::vector<Handshake>** p;
    ~Done() { *p = nullptr; }
  } done{&setting_up_};
  for (Handshake& h : hs) LOOM_RETURN_IF_ERROR(publish(h));
  for (Handshake& h : hs) LOOM_RETURN_IF_ERROR(deliver(h, deadline));
  for (Handshake& h : hs) LOOM_RETURN_IF_ERROR(open_incoming(h, deadline));
  for (Handshake& h : hs) LOOM_RETURN_IF_ERROR(await_mapped(h, deadline));
  return Status::ok();
}

// Publishes our card, once for every peer: who we are, where to ring us and where to hand us a
// channel. Its nonce names every channel we send on (with both ranks: unique per pair).
Status ShmTransport::publish(Handshake& h) {
  if (nonce_.empty()) {
    LOOM_ASSIGN_OR_RETURN(std::string nonce, random_hex(16));
    Card card;
    card.pid = ::getpid();
    card.pid_ns = proc::own_pid_namespace();
    card.doorbell = bell_->name();
    card.mailbox = mailbox_ ? mailbox_->name() : "";
    card.nonce = nonce;
    LOOM_RETURN_IF_ERROR(store_->set(card_key(rank_), bootstrap::as_bytes(format_card(card))));
    nonce_ = std::move(nonce);
  }
  h.nonce = nonce_;
  return Status::ok();
}

// Reads h.peer's card, creates our sending channel and hands it over: its descriptor to the
// peer's mailbox, or its name to the store.
Status ShmTransport::deliver(Handshake& h, Deadline deadline) {
  std::optional<Card>& known = cards_[static_cast<std::size_t>(h.peer)];
  if (!known) {
    Handshake* nobody = nullptr;  // the peer's process is unknown until its card is read
    auto got = wait_for_key(card_key(h.peer), nobody, deadline, h.peer);
    if (!got.is_ok())
      return got.status().with_context(fmt::format(
          "rank {}: waiting for rank {} to publish its shared-memory card (is it running and "
          "calling the same collectives?)",
          rank_, h.peer));
    LOOM_ASSIGN_OR_RETURN(known, parse_card(std::string(got->begin(), got->end()), rank_, h.peer));
  }
  h.card = *known;
  h.info.rank = h.peer;
  h.info.process = proc::PeerProcess::watch(h.card.pid, h.card.pid_ns);
  LOOM_RETURN_IF_ERROR(check_peer(h));
  h.by_fd = mailbox_ != nullptr && !h.card.mailbox.empty();
  if (!h.by_fd && options_.segments == SegmentKind::Memfd)
    return make_error(ErrorCode::InvalidUsage,
                      "rank {}: LOOM_SHM_SEGMENTS=memfd, but rank {} hands over named segments "
                      "(set LOOM_SHM_SEGMENTS alike on every rank)",
                      rank_, h.peer);
  LOOM_RETURN_IF_ERROR(create_channel(h));
  if (!h.by_fd) return store_->set(key(rank_, h.peer) + "/segment", bootstrap::as_bytes(h.out_id));
  Letter letter;
  letter.comm_id = comm_id_;
  letter.from_rank = rank_;
  letter.to_rank = h.peer;
  std::memcpy(letter.nonce.data(), h.nonce.data(), letter.nonce.size());
  LOOM_ASSIGN_OR_RETURN(DoorbellAddress to, DoorbellAddress::from_name(h.card.mailbox));
  if (Status st = FdMailbox::send(to, letter, h.out.fd.get(), deadline); !st.is_ok()) {
    if (st.code() != ErrorCode::PeerFailed) return st;
    // Its mailbox is gone because it exited (its descriptors close a moment before its exit is
    // seen): say so; a peer that still runs is out of reach.
    for (int i = 0; i < 50 && h.info.process.alive(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    LOOM_RETURN_IF_ERROR(check_peer(h));
    // A peer whose communicator ended (destroyed or aborted) while its process runs closes its
    // mailbox too: its failure is shared a moment later, so ask for it directly for a while.
    LOOM_RETURN_IF_ERROR(await_shared_failure(h.peer, deadline));
    return make_error(ErrorCode::SystemError,
                      "rank {}: rank {} (pid {}) runs, but its shared-memory mailbox cannot be "
                      "reached (is it in another network namespace? then use the tcp transport)",
                      rank_, h.peer, h.card.pid);
  }
  h.out.fd.reset();  // the peer holds it now (or its socket does, until it takes it)
  return Status::ok();
}

Status ShmTransport::create_channel(Handshake& h) {
  if (h.by_fd) {
    LOOM_ASSIGN_OR_RETURN(h.out, create_anonymous_segment(geometry_.total_bytes()));
    h.out_id = "memfd:" + h.nonce;
  } else {
    const std::string prefix =
        fmt::format("/loom-{:016x}-{}-{}-{}", comm_id_, rank_, h.peer, h.nonce);
    LOOM_ASSIGN_OR_RETURN(h.out, create_segment(prefix, geometry_.total_bytes()));
    h.out_id = h.out.name.str();
  }
  // Tests only: the worst moment to be killed, with the segment created and its header unwritten.
  if (options_.test_kill_after_create) ::raise(SIGKILL);
  init_channel(h.out.mapping, geometry_, comm_id_, rank_, h.peer);
  return Status::ok();
}

// Takes h.peer's sending channel: its descriptor from our mailbox, or its name from the store
// (then unlinked at once: the creator unlinks it too, whoever comes first).
Status ShmTransport::receive_channel(Handshake& h, Deadline deadline) {
  const std::size_t min_bytes = ChannelGeometry{kMinSlotBytes, 1}.total_bytes();
  if (h.by_fd) {
    std::array<char, 32> nonce{};
    std::memcpy(nonce.data(), h.card.nonce.data(), nonce.size());
    auto fd = mailbox_->receive(h.peer, h.card.pid, nonce, deadline, [&] { return check_peer(h); });
    if (!fd.is_ok())
      return fd.status().with_context(
          fmt::format("rank {}: waiting for rank {}'s shared-memory channel", rank_, h.peer));
    h.in_id = "memfd:" + h.card.nonce;
    LOOM_ASSIGN_OR_RETURN(h.in, map_segment_fd(fd->get(), min_bytes, kMaxChannelBytes,
                                               fmt::format("(memfd of rank {})", h.peer)));
    return Status::ok();
  }
  auto got = wait_for_key(key(h.peer, rank_) + "/segment", &h, deadline);
  if (!got.is_ok())
    return got.status().with_context(fmt::format(
        "rank {}: waiting for rank {} to publish its shared-memory channel", rank_, h.peer));
  h.in_id.assign(got->begin(), got->end());
  const std::string prefix =
      fmt::format("/loom-{:016x}-{}-{}-{}_o", comm_id_, h.peer, rank_, h.card.nonce);
  if (h.in_id.rfind(prefix, 0) != 0 || h.in_id.find('/', 1) != std::string::npos)
    return make_error(ErrorCode::Mismatch,
                      "rank {}: rank {} published a malformed shared-memory channel name", rank_,
                      h.peer);
  LOOM_ASSIGN_OR_RETURN(h.in, open_segment(h.in_id, min_bytes, kMaxChannelBytes));
  unlink_segment(h.in_id);
  return Status::ok();
}

// Waits for a key the peer sets, in slices, asking between them whether the peer is known to
// have failed or its process has exited: a rank that left or died before connecting ends the
// wait at once, not at the deadline. A store that ends waits when a client vanishes (a dead
// peer's store connection closes) ends the slice at once then, so its slices are longer.
// (Short gets also leave the shared store connection to the failure monitor.)
Result<bootstrap::Bytes> ShmTransport::wait_for_key(const std::string& k, const Handshake* h,
                                                    Deadline deadline, int peer) {
  const bool pushed = store_->waits_end_on_gone();
  const auto slice = std::chrono::milliseconds(pushed ? 1000 : 100);
  for (;;) {
    const Deadline until = deadline.earliest(Deadline::after(slice));
    auto got = pushed ? store_->get_or_gone(k, until) : store_->get(k, until);
    if (got.is_ok() || got.status().code() != ErrorCode::Timeout || deadline.expired()) return got;
    if (h != nullptr) {
      LOOM_RETURN_IF_ERROR(check_peer(*h));
    } else {
      LOOM_RETURN_IF_ERROR(check_others());
      LOOM_RETURN_IF_ERROR(known_failure(peer));
    }
  }
}

// A peer whose process has exited (its card names it), or that the communicator knows failed:
// `h`, or any other peer this ensure() sets up (a wait for one peer then ends with the death of
// another, which is the cause, rather than with what that death does to the one awaited).
Status ShmTransport::await_shared_failure(int peer, Deadline deadline) const {
  if (!peer_check_) return Status::ok();
  const Deadline until = deadline.earliest(Deadline::after(std::chrono::seconds(2)));
  do {
    LOOM_RETURN_IF_ERROR(peer_check_(peer));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } while (!until.expired());
  return Status::ok();
}

Status ShmTransport::check_peer(const Handshake& h) const {
  if (!h.info.process.alive() && !setup_done(h)) return exited(h);
  LOOM_RETURN_IF_ERROR(check_others());
  return known_failure(h.peer);
}

// The peers of this ensure() whose cards were read and whose processes have exited before both
// channels were acknowledged (a peer whose setup is done may have finished and left).
Status ShmTransport::check_others() const {
  if (setting_up_ != nullptr)
    for (const Handshake& x : *setting_up_)
      if (!x.info.process.alive() && !setup_done(x)) return exited(x);
  return Status::ok();
}

// Both channels acknowledged, whether or not this rank has read the peer's acknowledgement yet
// (in our sending channel's header).
bool ShmTransport::setup_done(const Handshake& h) const {
  if (h.done()) return true;
  if (!h.acked || h.out.mapping.data() == nullptr) return false;
  const auto& header = *reinterpret_cast<const ChannelHeader*>(h.out.mapping.data());
  return header.mapped.load(std::memory_order_acquire) == 1;
}

Status ShmTransport::exited(const Handshake& h) const {
  return make_error(ErrorCode::PeerFailed,
                    "rank {}: rank {} (pid {}) exited before its shared-memory connection was set "
                    "up",
                    rank_, h.peer, h.card.pid)
      .with_peer(h.peer);
}

// Maps h.peer's sending channel, checks it and acknowledges it.
Status ShmTransport::open_incoming(Handshake& h, Deadline deadline) {
  LOOM_RETURN_IF_ERROR(receive_channel(h, deadline));
  LOOM_ASSIGN_OR_RETURN(h.info.doorbell, DoorbellAddress::from_name(h.card.doorbell));
  LOOM_ASSIGN_OR_RETURN(h.in_geometry, check_channel(h.in, comm_id_, h.peer, rank_));
  auto& header = *reinterpret_cast<ChannelHeader*>(h.in.data());
  if (header.sender_pid != h.card.pid || header.sender_pid_ns != h.card.pid_ns)
    return make_error(ErrorCode::Mismatch,
                      "rank {}: the shared-memory channel from rank {} was created by pid {}, "
                      "but rank {} is pid {}",
                      rank_, h.peer, header.sender_pid, h.peer, h.card.pid);
  LOOM_RETURN_IF_ERROR(check_peer(h));
  LOOM_RETURN_IF_ERROR(bell_->probe(h.info.doorbell, h.peer));
  LOOM_RETURN_IF_ERROR(probe_single_copy(h));
  header.single_copy.store(h.single_copy_in, std::memory_order_relaxed);
  header.maps_shared.store(h.maps_in ? 1 : 0, std::memory_order_relaxed);
  header.mapped.store(1, std::memory_order_release);  // the acknowledgement the peer waits for
  h.acked = true;
  return Status::ok();
}

// Waits until h.peer has mapped our sending channel (its header says so: that memory is this
// very channel, so no earlier attempt's can be taken for it), then removes its name (if any).
Status ShmTransport::await_mapped(Handshake& h, Deadline deadline) {
  const auto& header = *reinterpret_cast<const ChannelHeader*>(h.out.mapping.data());
  auto nap = std::chrono::microseconds(100);
  auto checked = std::chrono::steady_clock::now();
  while (header.mapped.load(std::memory_order_acquire) != 1) {
    if (deadline.expired())
      return make_error(ErrorCode::Timeout,
                        "rank {}: timed out waiting for rank {} to map our shared-memory channel",
                        rank_, h.peer);
    std::this_thread::sleep_for(nap);
    nap = std::min<std::chrono::microseconds>(2 * nap, std::chrono::milliseconds(10));
    if (std::chrono::steady_clock::now() - checked >= std::chrono::milliseconds(100)) {
      checked = std::chrono::steady_clock::now();
      if (Status st = check_peer(h); !st.is_ok())
        return st.with_context(fmt::format(
            "rank {}: waiting for rank {} to map our shared-memory channel", rank_, h.peer));
    }
  }
  h.out.name.unlink();
  h.peer_acked = true;
  h.single_copy_out = options_.single_copy == SingleCopy::Off
                          ? kReadsNone
                          : header.single_copy.load(std::memory_order_relaxed);
  h.maps_out = options_.single_copy != SingleCopy::Off &&
               header.maps_shared.load(std::memory_order_relaxed) != 0;
  return Status::ok();
}

// Tries one single-copy read of the peer's view of the channel header and compares it with
// ours (the same shared memory). LOOM_SHM_SINGLE_COPY=on makes a refusal an error; auto falls
// back to the slot rings.
Status ShmTransport::probe_single_copy(Handshake& h) {
  if (options_.single_copy == SingleCopy::Off) return Status::ok();
  const auto& header = *reinterpret_cast<const ChannelHeader*>(h.in.data());
  Status st;
  if (header.sender_pid_ns != proc::own_pid_namespace() || header.sender_address == 0) {
    st = Status(ErrorCode::SystemError, "the peer is in another pid namespace");
  } else {
    constexpr std::size_t kProbe = offsetof(ChannelHeader, mapped);
    std::array<std::uint8_t, kProbe> got{};
    st = cma_read(header.sender_pid, got.data(), header.sender_address, kProbe, "probe");
    if (st.is_ok() && std::memcmp(got.data(), h.in.data(), kProbe) != 0)
      st = Status(ErrorCode::SystemError, "the probe read returned different bytes");
  }
  // Reading the peer's memory is allowed: so is mapping its shared buffers (/proc/<pid>/fd needs
  // less than process_vm_readv), which pays wherever memcpy does.
  h.maps_in = st.is_ok();
  if (st.is_ok()) {
    h.single_copy_in = kReadsAll;
    if (options_.single_copy == SingleCopy::Auto) {
      const CopyRates& rates = measured_copy_rates();
      h.single_copy_in = rates.auto_reads();
      if (h.single_copy_in != kReadsAll)
        LOOM_LOG_DEBUG(Shm,
                       "rank {}: process_vm_readv copies {:.1f} GB/s here, memcpy {:.1f} GB/s: "
                       "single-copy reads from rank {} only for messages copied out, up to the "
                       "sender's LOOM_SHM_SINGLE_COPY_MAX",
                       rank_, rates.single_copy_gbs, rates.memcpy_gbs, h.peer);
    }
    return Status::ok();
  }
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
