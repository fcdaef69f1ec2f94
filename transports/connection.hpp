// The single seam between the executor (above) and the transports (below). A Connection moves
// bytes to and from one peer; it knows nothing of collectives. Everything is non-blocking: the
// executor owns progress and calls test() until requests complete.
#pragma once

#include <poll.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "collective/kinds.hpp"
#include "collective/tag.hpp"
#include "common/deadline.hpp"
#include "common/status.hpp"
#include "loom/types.hpp"

namespace loom::transport {

struct Caps {
  bool host_memory = true;
  bool device_memory = false;
  bool direct_load_store = false;  // peer memory can be read/written with plain loads/stores
  /// Requests complete once their device work is queued on the stream the executor's local
  /// steps use (cuda_ipc): the stream's order is their order. A connection without it reads and
  /// writes memory itself (a NIC), so device work queued before must have run first (a fence).
  bool stream_ordered = false;
  /// peek_unread() shows the first message no receive has taken (a receive from any source
  /// needs it of every connection).
  bool peeks = false;
};

// The seam's vocabulary, defined below it (src/collective): message tags and memory kinds.
using coll::describe_tag;
using coll::MemoryKind;
using coll::mismatched_message;
using coll::Tag;

/// A buffer the executor sends from or receives into: the whole buffer, of which a request uses
/// [off, off + len). Transports that need registration keep their handle in `handle`, and
/// register device memory as a whole (`alloc_id` tells a reallocation at the same address).
struct MemRegion {
  void* base = nullptr;
  std::size_t size = 0;
  void* handle = nullptr;
  MemoryKind space = MemoryKind::Host;
  int device = -1;             // Device: the device ordinal
  std::uint64_t alloc_id = 0;  // Device: the allocation's process-wide id (0: unknown)
};

/// A message that has arrived from a peer and that no posted receive has taken yet.
struct Unread {
  Tag tag;
  std::uint64_t length = 0;  // the whole message's length
};

/// For Connection::irecv_reduce: when the message arrives, dst[i] = local[i] OP incoming[i]
/// for every element, read straight from the transport's buffers (no staging copy). `dst` may be
/// `local`.
struct ReduceInto {
  DataType dtype = DataType::Uint8;
  RedOp op = RedOp::Sum;
  const void* local = nullptr;
  void* dst = nullptr;
};

/// Handle of one posted isend/irecv.
struct Request {
  std::uint64_t id = 0;
};

class Connection {
 public:
  virtual ~Connection() = default;
  [[nodiscard]] virtual Caps caps() const = 0;
  [[nodiscard]] virtual int peer() const = 0;
  [[nodiscard]] virtual std::string name() const = 0;  // "tcp", "shm", ...

  /// Queue `len` bytes at `region.base + off` for the peer. Messages to one peer are delivered in
  /// the order they were posted and matched in order against the peer's posted receives.
  virtual Result<Request> isend(const MemRegion& region, std::size_t off, std::size_t len,
                                const Tag& tag) = 0;
  /// isend for a sender with more to do than wait for its receiver: a transport that can either
  /// copy the message into its own buffers or let the peer read it in place (shm's single copy)
  /// copies, so the send completes without the receiver being scheduled. Same matching rules;
  /// the default is isend.
  virtual Result<Request> isend_buffered(const MemRegion& region, std::size_t off, std::size_t len,
                                         const Tag& tag) {
    return isend(region, off, len, tag);
  }
  /// Post a receive of exactly `len` bytes. A message whose tag or length differs fails the
  /// request with ErrorCode::Mismatch naming both ranks.
  virtual Result<Request> irecv(const MemRegion& region, std::size_t off, std::size_t len,
                                const Tag& tag) = 0;
  /// Optional fused receive-and-reduce (see ReduceInto), for transports whose incoming data sits
  /// in memory the receiver can read directly. Same matching rules as irecv.
  [[nodiscard]] virtual bool supports_recv_reduce() const { return false; }
  virtual Result<Request> irecv_reduce(const ReduceInto& into, std::size_t len, const Tag& tag) {
    (void)into;
    (void)len;
    (void)tag;
    return Status(ErrorCode::Internal, name() + ": irecv_reduce is not supported");
  }
  /// The next message from the peer that has arrived and that no posted receive has claimed,
  /// without consuming it; nullopt when none has arrived, when a receive is posted (it checks
  /// the message itself), or when the transport cannot tell. Never blocks. The communicator asks
  /// when it is idle, at a barrier and at destruction: a message of a call it has finished is
  /// one that no call will ever receive (a mismatched call, docs/reliability.md).
  virtual std::optional<Unread> peek_unread() { return std::nullopt; }
  /// Makes progress; true once the request has completed (after which it must not be tested
  /// again). Never blocks.
  virtual Result<bool> test(const Request& request) = 0;
  /// Called before the executor blocks in poll(2) because no request made progress. Adds the
  /// file descriptors that become readable/writable when this connection can progress (a shared
  /// memory connection adds its rank's doorbell and arms its "sleeping" flags). Returns false
  /// when progress is possible right now, so the executor must not block. A connection that has
  /// no descriptor to offer while it waits (CUDA IPC: a peer's stream) adds want_timed_wakeup().
  virtual bool prepare_wait(std::vector<pollfd>& fds) = 0;
  /// A count that grows whenever the connection moves part of a message (CUDA IPC: a FIFO
  /// piece copied, published, read or retired), for transports that move a message in steps
  /// no request completion shows: the executor counts a change as progress, so that it keeps
  /// polling at the pace of the pieces rather than backing off as if nothing happened. 0 where
  /// a message moves in one step or its steps wake the executor anyway.
  [[nodiscard]] virtual std::uint64_t moved() const { return 0; }
  /// Where the connection's pending messages stand, for a timeout's message ("" when a
  /// request's own state says it all): e.g. CUDA IPC's pieces enqueued, published and read.
  [[nodiscard]] virtual std::string state() const { return {}; }
};

/// Connections by peer, established on demand (a transport, or a router over several).
class ConnectionSet {
 public:
  virtual ~ConnectionSet() = default;
  /// Connections to every peer in `peers`, establishing missing ones.
  virtual Status ensure(const std::vector<int>& peers, Deadline deadline) = 0;
  /// The connection to `peer`, or null before ensure().
  [[nodiscard]] virtual Connection* get(int peer) const = 0;
};

/// A pollfd of -1 (poll(2) skips it): the waiter wakes up on a short, backing-off timer.
inline void want_timed_wakeup(std::vector<pollfd>& fds) {
  fds.push_back(pollfd{-1, 0, 0});
}

}  // namespace loom::transport
