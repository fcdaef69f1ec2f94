#include "transports/cuda_ipc/cuda_ipc_connection.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace loom::transport::cuda_ipc {
namespace {

std::size_t piece_bytes(std::size_t len, std::uint64_t piece, std::size_t slot_bytes) {
  const std::size_t off = static_cast<std::size_t>(piece) * slot_bytes;
  return std::min(slot_bytes, len - off);
}

}  // namespace

Result<std::unique_ptr<CudaIpcConnection>> CudaIpcConnection::create(device::Device& dev,
                                                                     device::Stream stream,
                                                                     int self, int peer,
                                                                     device::PeerRoute route,
                                                                     FifoPair fifos) {
  std::unique_ptr<CudaIpcConnection> c(
      new CudaIpcConnection(dev, stream, self, peer, route, fifos));
  for (std::size_t i = 0; i < kSlots; ++i) {
    LOOM_ASSIGN_OR_RETURN(c->send_events_[i], dev.create_event());
    LOOM_ASSIGN_OR_RETURN(c->recv_events_[i], dev.create_event());
  }
  return c;
}

CudaIpcConnection::~CudaIpcConnection() {
  const int failed = fifos_.seen_failure ? fifos_.seen_failure->load() : -1;
  if (fifos_.out_control) {
    fifos_.out_control->sender_saw_failure_of.store(failed, std::memory_order_relaxed);
    fifos_.out_control->sender_closed.store(1, std::memory_order_release);
  }
  if (fifos_.in_control) {
    fifos_.in_control->receiver_saw_failure_of.store(failed, std::memory_order_relaxed);
    fifos_.in_control->receiver_closed.store(1, std::memory_order_release);
  }
  for (device::Event e : send_events_)
    if (e) dev_.destroy_event(e);
  for (device::Event e : recv_events_)
    if (e) dev_.destroy_event(e);
}

// A message's last piece follows the pieces of every message posted before it in its direction
// (`end`), not those of the last op still queued: test() erases completed ops in any order.
CudaIpcConnection::Op CudaIpcConnection::new_op(std::uint8_t* dst, std::size_t len, const Tag& tag,
                                                std::uint64_t& end) {
  Op op;
  op.id = next_id_++;
  op.dst = dst;
  op.len = len;
  op.tag = tag;
  op.last_seq = end += pieces_of(len, fifos_.slot_bytes);
  return op;
}

Result<Request> CudaIpcConnection::isend(const MemRegion& region, std::size_t off, std::size_t len,
                                         const Tag& tag) {
  // dst: the source, for a send
  return queue(true, new_op(static_cast<std::uint8_t*>(region.base) + off, len, tag, send_end_));
}

Result<Request> CudaIpcConnection::irecv(const MemRegion& region, std::size_t off, std::size_t len,
                                         const Tag& tag) {
  return queue(false, new_op(static_cast<std::uint8_t*>(region.base) + off, len, tag, recv_end_));
}

Result<Request> CudaIpcConnection::irecv_reduce(const ReduceInto& into, std::size_t len,
                                                const Tag& tag) {
  Op op = new_op(static_cast<std::uint8_t*>(into.dst), len, tag, recv_end_);
  op.reduce = true;
  op.local = static_cast<const std::uint8_t*>(into.local);
  op.dtype = into.dtype;
  op.redop = into.op;
  return queue(false, op);
}

// Queues `op` and starts what can start now.
Result<Request> CudaIpcConnection::queue(bool send, const Op& op) {
  (send ? sends_ : recvs_).push_back(op);
  LOOM_RETURN_IF_ERROR(send ? progress_sends() : progress_recvs());
  return Request{op.id};
}

Result<bool> CudaIpcConnection::test(const Request& request) {
  LOOM_RETURN_IF_ERROR(progress());
  for (auto* q : {&sends_, &recvs_}) {
    auto it = std::find_if(q->begin(), q->end(), [&](const Op& o) { return o.id == request.id; });
    if (it == q->end()) continue;
    if (!it->done) return false;
    q->erase(it);
    return true;
  }
  return make_error(ErrorCode::Internal, "rank {}: cuda_ipc request {} to/from rank {} unknown",
                    self_, request.id, peer_);
}

std::string CudaIpcConnection::state() const {
  const std::uint64_t read = fifos_.out_control->consumed.load(std::memory_order_acquire);
  const std::uint64_t offered = fifos_.in_control->published.load(std::memory_order_acquire);
  const char* out = copied_ > published_ ? "a copy into our FIFO has not finished on the stream"
                    : published_ > read  ? "the peer has not read every piece"
                                         : "nothing";
  const char* in = taken_ > retired_  ? "our copy or kernel out of its FIFO has not finished"
                   : offered > taken_ ? "we have not taken every piece"
                                      : "the peer has not published the next piece";
  return fmt::format(
      "cuda_ipc pieces to rank {}: {} enqueued, {} published, {} read by it (waiting: {}); from "
      "it: {} published, {} taken, {} retired (waiting: {})",
      peer_, copied_, published_, read, sends_.empty() ? "nothing" : out, offered, taken_, retired_,
      recvs_.empty() ? "nothing" : in);
}

// Nothing signals a descriptor when the peer's stream moves a FIFO: while anything is pending,
// ask for a timed wake-up (the engine naps, backing off) instead of spinning against the peer
// and the streams for the CPU.
bool CudaIpcConnection::prepare_wait(std::vector<pollfd>& fds) {
  if (!sends_.empty() || !recvs_.empty()) want_timed_wakeup(fds);
  return true;
}

Status CudaIpcConnection::progress() {
  LOOM_RETURN_IF_ERROR(progress_sends());
  return progress_recvs();
}

Status CudaIpcConnection::check_peer_open(bool sending) const {
  const bool closed = sending
                          ? fifos_.out_control->receiver_closed.load(std::memory_order_acquire) != 0
                          : fifos_.in_control->sender_closed.load(std::memory_order_acquire) != 0;
  if (!closed) return Status::ok();
  const int cause = sending ? fifos_.out_control->receiver_saw_failure_of.load()
                            : fifos_.in_control->sender_saw_failure_of.load();
  const std::string what = sending ? "send to it" : "receive from it";
  if (cause >= 0 && cause != self_ && cause != peer_)
    return make_error(ErrorCode::PeerFailed,
                      "rank {}: cuda_ipc: rank {} failed (rank {} closed its end after seeing "
                      "it fail, while a {} was pending)",
                      self_, cause, peer_, what)
        .with_peer(cause);
  return make_error(ErrorCode::PeerFailed,
                    "rank {}: cuda_ipc: rank {} closed its end while a {} was pending", self_,
                    peer_, what)
      .with_peer(peer_);
}

// Enqueue copies into free slots (in message order), publish the pieces whose copy has
// completed, and complete the sends whose every piece the peer has read (so a rank that has
// finished and tears down never frees a slot its peer is still reading).
Status CudaIpcConnection::progress_sends() {
  if (sends_.empty()) return Status::ok();
  const std::size_t size = fifos_.slot_bytes;
  ControlBlock& ctl = *fifos_.out_control;
  const std::uint64_t consumed = ctl.consumed.load(std::memory_order_acquire);
  for (Op& op : sends_) {
    const std::uint64_t n = pieces_of(op.len, size);
    while (op.next_piece < n && copied_ - consumed < kSlots) {
      const std::size_t slot = copied_ % kSlots;
      const std::size_t off = static_cast<std::size_t>(op.next_piece) * size;
      const std::size_t bytes = op.len == 0 ? 0 : piece_bytes(op.len, op.next_piece, size);
      LOOM_RETURN_IF_ERROR(
          dev_.copy_async(fifos_.out_data + slot * size, op.dst + off, bytes, stream_));
      ctl.slots[slot] = Descriptor{op.tag, op.len, off, bytes};
      LOOM_RETURN_IF_ERROR(dev_.record(send_events_[slot], stream_));
      ++copied_;
      ++op.next_piece;
    }
    if (op.next_piece < n) break;  // pieces go out in message order
  }
  while (published_ < copied_) {
    LOOM_ASSIGN_OR_RETURN(bool ready, dev_.query(send_events_[published_ % kSlots]));
    if (!ready) break;
    ++published_;
    ctl.published.store(published_, std::memory_order_release);
  }
  // A peer that read our last piece may close right after: read its closed flag first, then
  // the counter it stored before closing, so a finished send is never taken for a failed one.
  const bool closed = ctl.receiver_closed.load(std::memory_order_acquire) != 0;
  const std::uint64_t read = ctl.consumed.load(std::memory_order_acquire);
  bool pending = false;
  for (Op& op : sends_) {
    op.done = op.done || (op.next_piece == pieces_of(op.len, size) && read >= op.last_seq);
    pending = pending || !op.done;
  }
  return pending && closed ? check_peer_open(true) : Status::ok();
}

Status CudaIpcConnection::take_piece(Op& op, std::uint64_t seq) {
  const std::size_t size = fifos_.slot_bytes;
  const std::size_t slot = seq % kSlots;
  const Descriptor d = fifos_.in_control->slots[slot];
  const std::size_t off = static_cast<std::size_t>(op.next_piece) * size;
  const std::size_t bytes = op.len == 0 ? 0 : piece_bytes(op.len, op.next_piece, size);
  if (!(d.tag == op.tag) || d.message_bytes != op.len || d.offset != off || d.bytes != bytes)
    return mismatched_message(self_, peer_, op.tag, op.len, d.tag, d.message_bytes);
  const std::uint8_t* src = fifos_.in_data + slot * size;
  if (op.reduce) {
    const std::size_t count = bytes / dtype_size(op.dtype);
    if (count)
      LOOM_RETURN_IF_ERROR(
          dev_.reduce_async(op.dtype, op.redop, op.dst + off, op.local + off, src, count, stream_));
  } else {
    LOOM_RETURN_IF_ERROR(dev_.copy_async(op.dst + off, src, bytes, stream_));
  }
  return dev_.record(recv_events_[slot], stream_);
}

// Retire the pieces whose copy or reduction has completed (freeing the peer's slots), complete
// the receives whose every piece is retired, and start reading newly published pieces.
Status CudaIpcConnection::progress_recvs() {
  if (recvs_.empty()) return Status::ok();
  const std::size_t size = fifos_.slot_bytes;
  ControlBlock& ctl = *fifos_.in_control;
  while (retired_ < taken_) {
    LOOM_ASSIGN_OR_RETURN(bool ready, dev_.query(recv_events_[retired_ % kSlots]));
    if (!ready) break;
    ++retired_;
    ctl.consumed.store(retired_, std::memory_order_release);
  }
  const std::uint64_t published = ctl.published.load(std::memory_order_acquire);
  for (Op& op : recvs_) {
    const std::uint64_t n = pieces_of(op.len, size);
    while (op.next_piece < n && taken_ < published) {
      LOOM_RETURN_IF_ERROR(take_piece(op, taken_));
      ++taken_;
      ++op.next_piece;
    }
    if (op.next_piece < n) break;
  }
  bool pending = false;
  for (Op& op : recvs_) {
    op.done = op.done || (op.next_piece == pieces_of(op.len, size) && retired_ >= op.last_seq);
    pending = pending || !op.done;
  }
  return pending ? check_peer_open(false) : Status::ok();
}

}  // namespace loom::transport::cuda_ipc
