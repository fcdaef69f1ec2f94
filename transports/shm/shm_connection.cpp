#include "transports/shm/shm_connection.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "common/deadline.hpp"
#include "kernels/host/reduce.hpp"
#include "log/log.hpp"
#include "transports/shm/single_copy.hpp"

namespace loom::transport::shm {
namespace {

void add_fd(std::vector<pollfd>& fds, int fd) {
  if (fd < 0) return;
  for (const pollfd& p : fds)
    if (p.fd == fd) return;
  fds.push_back({fd, POLLIN, 0});
}

}  // namespace

ShmConnection::ShmConnection(int self_rank, ShmPeer peer, Channel out, Channel in,
                             std::shared_ptr<Doorbell> doorbell, SingleCopyParams single_copy,
                             bool reuse_drained_slots)
    : self_(self_rank),
      peer_(std::move(peer)),
      out_(std::move(out)),
      in_(std::move(in)),
      bell_(std::move(doorbell)),
      single_copy_(single_copy),
      reuse_drained_slots_(reuse_drained_slots) {}

ShmConnection::~ShmConnection() {
  out_.header().sender_closed.store(1, std::memory_order_release);
  in_.header().receiver_closed.store(1, std::memory_order_release);
  // Orders the stores before the ring: a peer that re-checks after draining its doorbell sees
  // them, or gets the ring (see prepare_wait).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  bell_->ring(peer_.doorbell);
}

std::string ShmConnection::who() const {
  return fmt::format("rank {} <-> rank {} (shm)", self_, peer_.rank);
}

Status ShmConnection::fail(Status why) {
  if (broken_.is_ok()) {
    broken_ = std::move(why);
    LOOM_LOG_DEBUG(Shm, "{}", broken_.message());
  }
  return broken_;
}

Result<ShmConnection::Op*> ShmConnection::allocate(OpKind kind) {
  if (!broken_.is_ok()) return broken_;
  LOOM_ASSIGN_OR_RETURN(Op * op, ops_.allocate([this] { return who(); }));
  op->kind = kind;
  return op;
}

// Whether the peer reads a message from a buffer loom did not allocate with process_vm_readv,
// rather than from the slots (single_copy.hpp: which messages take which path).
bool ShmConnection::peer_reads_in_place(std::size_t len, const Tag& tag) const {
  const std::uint32_t reads = single_copy_.peer_reads;
  if (message_may_be_reduced(tag.kind) ? (reads & kReadsReductions) == 0
                                       : (reads & kReadsCopies) == 0)
    return false;
  if ((reads & kReadsAnySize) != 0) return true;
  return len <= (message_is_exchange(tag.kind) ? single_copy_.max_bytes.exchange
                                               : single_copy_.max_bytes.any);
}

// Every use of the connection ends a wait cycle and withdraws our sleeping flags: we are awake.
void ShmConnection::touch() {
  bell_->end_wait();
  disarm();
}

void ShmConnection::disarm() {
  if (armed_recv_) in_.header().receiver_sleeping.store(0, std::memory_order_relaxed);
  if (armed_send_) out_.header().sender_sleeping.store(0, std::memory_order_relaxed);
  armed_recv_ = armed_send_ = false;
}

Result<Request> ShmConnection::isend(const MemRegion& region, std::size_t off, std::size_t len,
                                     const Tag& tag) {
  return post_send(region, off, len, tag, true);
}

Result<Request> ShmConnection::isend_buffered(const MemRegion& region, std::size_t off,
                                              std::size_t len, const Tag& tag) {
  return post_send(region, off, len, tag, false);
}

Result<Request> ShmConnection::post_send(const MemRegion& region, std::size_t off, std::size_t len,
                                         const Tag& tag, bool may_single_copy) {
  touch();
  if (off > region.size || len > region.size - off)
    return make_error(ErrorCode::InvalidArgument,
                      "{}: send of {} bytes at offset {} exceeds a {}"
                      "-byte region",
                      who(), len, off, region.size);
  LOOM_ASSIGN_OR_RETURN(Op * op, allocate(OpKind::Send));
  op->data = static_cast<std::uint8_t*>(region.base) + off;
  op->len = len;
  op->tag = tag;
  op->single_copy = false;
  op->shared = {};
  if (may_single_copy && len > 0 && len >= single_copy_.min_bytes) {
    // From a loom::host_alloc buffer the peer maps it and copies in user space: worth it even
    // where process_vm_readv is not.
    if (single_copy_.peer_maps)
      op->shared = shared_buffers::find(op->data, len).value_or(shared_buffers::Location{});
    op->single_copy = op->shared.fd >= 0 || peer_reads_in_place(len, tag);
  }
  sendq_.push_back(op);
  if (sendq_.size() == 1) {
    if (Status st = progress_send(); !st.is_ok()) return fail(st);
  }
  return Request{op->id};
}

Result<Request> ShmConnection::irecv(const MemRegion& region, std::size_t off, std::size_t len,
                                     const Tag& tag) {
  touch();
  if (off > region.size || len > region.size - off)
    return make_error(ErrorCode::InvalidArgument,
                      "{}: receive of {} bytes at offset {} exceeds a "
                      "{}-byte region",
                      who(), len, off, region.size);
  LOOM_ASSIGN_OR_RETURN(Op * op, allocate(OpKind::Recv));
  op->data = static_cast<std::uint8_t*>(region.base) + off;
  op->len = len;
  op->tag = tag;
  recvq_.push_back(op);
  return Request{op->id};
}

Result<Request> ShmConnection::irecv_reduce(const ReduceInto& into, std::size_t len,
                                            const Tag& tag) {
  touch();
  std::size_t esize = dtype_size(into.dtype);
  if (esize == 0 || !is_valid(into.op) || len % esize != 0 ||
      (len > 0 && (into.dst == nullptr || into.local == nullptr)))
    return make_error(ErrorCode::InvalidArgument,
                      "{}: invalid fused receive-reduce ({} bytes, dtype {}, op {})", who(), len,
                      static_cast<int>(into.dtype), static_cast<int>(into.op));
  LOOM_ASSIGN_OR_RETURN(Op * op, allocate(OpKind::RecvReduce));
  op->data = static_cast<std::uint8_t*>(into.dst);
  op->local = static_cast<const std::uint8_t*>(into.local);
  op->dtype = into.dtype;
  op->redop = into.op;
  op->len = len;
  op->tag = tag;
  recvq_.push_back(op);
  return Request{op->id};
}

Result<bool> ShmConnection::test(const Request& request) {
  LOOM_ASSIGN_OR_RETURN(Op * found, ops_.find(request, [this] { return who(); }));
  Op& op = *found;
  touch();
  if (!op.complete) {
    if (!broken_.is_ok()) return broken_;
    Status st = op.kind == OpKind::Send ? progress_send() : progress_recv();
    if (!st.is_ok()) return fail(st);
  }
  if (!op.complete) return false;
  ops_.release(op);
  return true;
}

// After a store that the peer may be sleeping on: wakes it if it said it sleeps. The fence pairs
// with the one in prepare_wait (flag store; fence; re-check): either the peer's re-check sees our
// store, or we see its flag.
void ShmConnection::wake_peer(std::atomic<std::uint32_t>& sleeping) const {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (sleeping.load(std::memory_order_relaxed) != 0 &&
      sleeping.exchange(0, std::memory_order_relaxed) != 0)
    bell_->ring(peer_.doorbell);
}

// Copies queued sends into free slots, a fragment of up to one slot at a time; a single-copy send
// takes one slot for its descriptor and completes once the peer has read it (tail passes it).
Status ShmConnection::progress_send() {
  ChannelHeader& h = out_.header();
  bool published = false;
  while (!sendq_.empty()) {
    if (head_ - tail_seen_ == out_.nslots()) {
      tail_seen_ = h.tail.load(std::memory_order_acquire);
      if (head_ - tail_seen_ == out_.nslots()) break;
    }
    Op& op = *sendq_.front();
    publish(op, op.single_copy ? op.len : std::min(out_.slot_bytes(), op.len - op.done));
    published = true;
    if (op.done == op.len) {
      sendq_.pop_front();
      if (op.single_copy)
        acks_.push_back(&op);
      else
        op.complete = true;
    }
  }
  if (published) wake_peer(h.receiver_sleeping);
  check_acks();
  if ((sendq_.empty() && acks_.empty()) || published) return Status::ok();
  if (h.receiver_closed.load(std::memory_order_acquire) != 0 || peer_exited_) {
    check_acks();  // the close flag is stored after the receiver's last tail
    if (!sendq_.empty() || !acks_.empty())
      return peer_gone(sendq_.empty() ? *acks_.front() : *sendq_.front());
  }
  return Status::ok();
}

// Writes the next fragment of `op` (n bytes, or its descriptor only) and publishes it.
void ShmConnection::publish(Op& op, std::size_t n) {
  SlotDesc& d = out_.desc(head_);
  if (op.single_copy) {
    // The descriptor's second cache line is written (and read) only for single copy: the
    // receiver looks at shared_fd only when remote != 0.
    d.remote = reinterpret_cast<std::uintptr_t>(op.data + op.done);
    d.shared_fd = op.shared.fd;
    if (op.shared.fd >= 0) {
      d.shared_gen = op.shared.gen;
      d.shared_offset = op.shared.offset + op.done;
    }
    op.slot = head_;
  } else {
    d.remote = 0;
    if (n != 0) std::memcpy(out_.payload(head_, payload_base()), op.data + op.done, n);
  }
  d.tag = op.tag;
  d.total = op.len;
  d.offset = op.done;
  d.length = n;
  out_.header().head.store(++head_, std::memory_order_release);
  op.done += n;
  op.started = true;
}

// The position whose payload is slot 0 for the next fragment. With SlotOrder::Reuse, the next
// position itself when the peer has consumed every published slot (so the fragment lands in the
// slot last used, still in the caches), else unchanged; refreshes our view of tail only when it
// may have caught up. With Rotate, always 0 (position k's payload is slot k % nslots).
std::uint64_t ShmConnection::payload_base() {
  if (!reuse_drained_slots_) return 0;
  ChannelHeader& h = out_.header();
  if (tail_seen_ != head_) tail_seen_ = h.tail.load(std::memory_order_acquire);
  const std::uint64_t base = next_payload_base(head_, tail_seen_, base_);
  if (base != base_) {
    base_ = base;
    h.base.store(base_, std::memory_order_relaxed);  // ordered by the release of head
  }
  return base_;
}

// Completes the single-copy sends the peer has finished reading.
void ShmConnection::check_acks() {
  if (acks_.empty()) return;
  tail_seen_ = out_.header().tail.load(std::memory_order_acquire);
  while (!acks_.empty() && acks_.front()->slot < tail_seen_) {
    acks_.front()->complete = true;
    acks_.pop_front();
  }
}

bool ShmConnection::send_ready(const ChannelHeader& h) const {
  std::uint64_t tail = h.tail.load(std::memory_order_acquire);
  return (!sendq_.empty() && head_ - tail < out_.nslots()) ||
         (!acks_.empty() && acks_.front()->slot < tail);
}

// True if no unread slot is published (refreshing our view of head when we have caught up).
bool ShmConnection::incoming_empty() {
  if (tail_ != head_seen_) return false;
  head_seen_ = in_.header().head.load(std::memory_order_acquire);
  return tail_ == head_seen_;
}

// Consumes published slots into the posted receives, in order.
Status ShmConnection::progress_recv() {
  ChannelHeader& h = in_.header();
  bool consumed = false;
  Status st;
  while (!recvq_.empty() && !incoming_empty()) {
    Op& op = *recvq_.front();
    const SlotDesc d = in_.desc(tail_);  // a private copy: validated once, then used
    // base is read after the acquire of head that showed this slot: the sender stored it before
    // that head and cannot move it while the slot is unconsumed.
    st = consume(op, d, in_.payload(tail_, h.base.load(std::memory_order_relaxed)));
    if (!st.is_ok()) break;
    h.tail.store(++tail_, std::memory_order_release);
    consumed = true;
    if (op.done == op.len) {
      op.complete = true;
      recvq_.pop_front();
    }
  }
  if (consumed) wake_peer(h.sender_sleeping);
  LOOM_RETURN_IF_ERROR(st);
  if (recvq_.empty() || consumed) return Status::ok();
  if (h.sender_closed.load(std::memory_order_acquire) != 0 || peer_exited_) {
    // The close flag is stored after the sender's last head: re-read head to take what it sent.
    if (incoming_empty()) return peer_gone(*recvq_.front());
  }
  return Status::ok();
}

Status ShmConnection::consume(Op& op, const SlotDesc& d, const std::uint8_t* payload) {
  LOOM_RETURN_IF_ERROR(check_fragment(op, d));
  op.started = true;
  if (d.length == 0) return Status::ok();
  if (d.remote != 0) {
    LOOM_RETURN_IF_ERROR(read_peer(op, d));
  } else if (op.kind == OpKind::Recv) {
    std::memcpy(op.data + d.offset, payload, d.length);
  } else {
    kernels::reduce(op.dtype, op.redop, op.data + d.offset, op.local + d.offset, payload,
                    d.length / dtype_size(op.dtype));
  }
  op.done += d.length;
  return Status::ok();
}

// A single-copy fragment: read straight from the sender's buffer into the destination, or, to
// reduce, through a cache-sized staging buffer (so the reduction reads it from cache).
Status ShmConnection::read_peer(Op& op, const SlotDesc& d) {
  if (d.shared_fd >= 0) return read_mapped(op, d);
  constexpr std::size_t kBounceBytes = 64 << 10;  // a multiple of every element size
  const pid_t pid = peer_.process.pid();
  Status st;
  if (op.kind == OpKind::Recv) {
    st = cma_read(pid, op.data + d.offset, d.remote, d.length, "single-copy receive");
  } else {
    if (bounce_.empty()) bounce_.resize(kBounceBytes);
    const std::size_t esize = dtype_size(op.dtype);
    for (std::size_t off = 0; off < d.length && st.is_ok(); off += kBounceBytes) {
      std::size_t n = std::min(kBounceBytes, d.length - off);
      st = cma_read(pid, bounce_.data(), d.remote + off, n, "single-copy receive-reduce");
      if (st.is_ok())
        kernels::reduce(op.dtype, op.redop, op.data + d.offset + off, op.local + d.offset + off,
                        bounce_.data(), n / esize);
    }
  }
  if (st.is_ok()) count_cma_bytes(d.length);
  return read_outcome(op, st);
}

// A single-copy fragment from the sender's shared buffer, mapped here: copied or reduced
// straight out of it.
Status ShmConnection::read_mapped(Op& op, const SlotDesc& d) {
  auto src =
      peer_buffers_.map(peer_.process.pid(), d.shared_fd, d.shared_gen, d.shared_offset, d.length);
  if (src.is_ok()) {
    if (op.kind == OpKind::Recv)
      std::memcpy(op.data + d.offset, *src, d.length);
    else
      kernels::reduce(op.dtype, op.redop, op.data + d.offset, op.local + d.offset, *src,
                      d.length / dtype_size(op.dtype));
    count_mapped_bytes(d.length);
  }
  return read_outcome(op, src.status());
}

Status ShmConnection::read_outcome(Op& op, Status st) {
  // A sender closes its connection with a single-copy send unread only when it abandoned the
  // operation (its buffer may be gone): what we read cannot be trusted.
  if (st.is_ok() && in_.header().sender_closed.load(std::memory_order_acquire) != 0)
    return peer_gone(op);
  if (st.is_ok()) return st;
  if (st.code() == ErrorCode::SystemError && sender_withdrew()) return peer_gone(op);
  return st.with_context(fmt::format("{}: receiving {} ({} bytes) from rank {}", who(),
                                     describe_tag(op.tag), op.len, peer_.rank));
}

// A single-copy read failed (the sender's buffer is no longer mapped): a sender that abandoned
// the operation (its own peer failed) may have freed the buffer before it closes its
// connection or exits. Waits for either (bounded), so the error names the peer, not EFAULT.
bool ShmConnection::sender_withdrew() {
  constexpr auto kGrace = std::chrono::seconds(2);
  const auto start = Clock::now();
  for (;;) {
    if (in_.header().sender_closed.load(std::memory_order_acquire) != 0) return true;
    if (!peer_.process.alive()) {
      peer_exited_ = true;
      return true;
    }
    const auto waited = Clock::now() - start;
    if (waited >= kGrace) return false;
    std::this_thread::sleep_for(backoff_nap(waited));
  }
}

// Validates a slot's descriptor against the posted receive before any payload is touched.
Status ShmConnection::check_fragment(const Op& op, const SlotDesc& d) const {
  if (!op.started && (!(d.tag == op.tag) || d.total != op.len))
    return mismatched_message(self_, peer_.rank, op.tag, op.len, d.tag, d.total);
  std::size_t esize = op.kind == OpKind::RecvReduce ? dtype_size(op.dtype) : 1;
  bool ok = d.tag == op.tag && d.total == op.len && d.offset == op.done &&
            (d.remote != 0 ? (d.shared_fd >= 0 ? single_copy_.map_peer : single_copy_.read_peer)
                           : d.length <= in_.slot_bytes()) &&
            d.length <= op.len - op.done && (d.length != 0 || op.len == 0) && d.length % esize == 0;
  if (!ok)
    return make_error(ErrorCode::Mismatch,
                      "{}: corrupt fragment from rank {} (offset {}, length {} of {} bytes) while "
                      "receiving {} at offset {}",
                      who(), peer_.rank, d.offset, d.length, d.total, describe_tag(op.tag),
                      op.done);
  return Status::ok();
}

Status ShmConnection::peer_gone(const Op& op) const {
  bool send = op.kind == OpKind::Send;
  std::string what = fmt::format("{} {} ({} bytes, {} done) {} it", send ? "send" : "receive",
                                 describe_tag(op.tag), op.len, op.done, send ? "to" : "from");
  if (peer_exited_)
    return make_error(ErrorCode::PeerFailed,
                      "{}: rank {} (pid {}) exited while rank {} waited to {}", who(), peer_.rank,
                      peer_.process.pid(), self_, what);
  return make_error(ErrorCode::PeerFailed,
                    "{}: rank {} closed its shared-memory connection (communicator destroyed or "
                    "aborted) while rank {} waited to {}",
                    who(), peer_.rank, self_, what);
}

// The descriptor of the oldest unconsumed slot, when no receive is posted: a message's first
// fragment (every fragment before it belonged to receives that completed).
std::optional<Unread> ShmConnection::peek_unread() {
  if (!recvq_.empty() || !broken_.is_ok() || incoming_empty()) return std::nullopt;
  const SlotDesc d = in_.desc(tail_);
  return Unread{d.tag, d.total};
}

// Arms the sleeping flag of each direction we wait on, then re-checks: the peer's wake_peer
// either sees the flag (and rings the doorbell) or its store is visible to the re-check.
bool ShmConnection::prepare_wait(std::vector<pollfd>& fds) {
  const bool want_recv = !recvq_.empty();
  const bool want_send = !sendq_.empty() || !acks_.empty();
  if (!want_recv && !want_send) return true;
  if (!broken_.is_ok()) return false;
  bell_->begin_wait();
  if (!peer_exited_ && !peer_.process.alive()) peer_exited_ = true;
  if (peer_exited_) return false;  // test() drains what the peer left, then fails
  ChannelHeader& hin = in_.header();
  ChannelHeader& hout = out_.header();
  if (want_recv) hin.receiver_sleeping.store(1, std::memory_order_relaxed);
  if (want_send) hout.sender_sleeping.store(1, std::memory_order_relaxed);
  armed_recv_ = armed_recv_ || want_recv;
  armed_send_ = armed_send_ || want_send;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  bool ready = (want_recv && (hin.head.load(std::memory_order_acquire) != tail_ ||
                              hin.sender_closed.load(std::memory_order_acquire) != 0)) ||
               (want_send &&
                (send_ready(hout) || hout.receiver_closed.load(std::memory_order_acquire) != 0));
  if (ready) {
    disarm();
    return false;
  }
  add_fd(fds, bell_->fd());
  add_fd(fds, peer_.process.poll_fd());
  return true;
}

}  // namespace loom::transport::shm
