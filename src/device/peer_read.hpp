// The peer-read route: allreduce, allgather, reduce_scatter, broadcast and reduce on device
// buffers of ranks on one host, each rank reading its peers' buffers in place (CUDA IPC
// handles, cached per allocation: device_api/ipc_cache.hpp) with one kernel per rank and call
// (peer_read_plan.hpp), and every handoff between the ranks on the GPU (stream memory
// operations on flags in host shared memory: cuda_ipc's board, transports/device_transport.hpp).
//
// One call, ticket t (the route's calls are numbered alike on every rank), on rank r:
//   submit (the caller's thread): export r's buffers (ExportCache), record an event on the
//     caller's stream (its inputs are ready there), and enqueue on that stream a wait for the
//     route's gate word to reach t: the caller's later work waits for the collective, and no
//     host thread waits;
//   task (the engine, or the caller at once): post r's card (the call and its buffers) on the
//     board, read every peer's card of t (the calls must match: Mismatch otherwise), map the
//     peers' buffers (ImportCache), and enqueue on the communicator's stream, in order:
//       wait for the caller's event
//       arrive:  write 4t+1 into every peer's inbox, wait for 4t+1 in every inbox of r
//       the launch (at most one; none where r's block is empty)
//       leave:   write 4t+2 into every peer's inbox, wait for 4t+2 in every inbox of r
//       write t into the gate word (the caller's stream goes on), record the call's event
//     and the task is done: the host waits for nothing per call but the peers' cards.
// "arrive" orders every rank's writes into the others' outputs after their earlier work;
// "leave" keeps a rank's caller from touching its buffers before every peer is done with them.
// A call whose buffers a rank cannot share (cudaIpcGetMemHandle refuses memory of a
// stream-ordered pool) says so on its card, and every rank runs it through the cuda_ipc FIFOs
// instead (the `fallback` task), still ordered by the same event and gate word.
//
// Failures: a call's host part fails as any task (the peers' cards missing at the deadline:
// Timeout naming them; cards that differ: Mismatch naming both ranks). A peer that fails while
// calls are on the device (the transport's note_failure), or a call still on the device at its
// deadline, fails the route: its calls from the oldest unfinished one on are abandoned (their
// launches skip: the abandon word), the flags this rank's stream waits on are written by the
// host until the stream has drained, and the gate word is opened, so that no stream waits
// forever; the next call fails with the cause, naming the rank.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "collective/op.hpp"
#include "device_api/ipc_cache.hpp"
#include "executor/task.hpp"
#include "transports/device_transport.hpp"

namespace loom::device {

class PeerReadTask;

class PeerReadRoute {
 public:
  using Fallback = std::function<std::unique_ptr<exec::Task>()>;
  /// The route over `transport`'s stream and `board` (both outlive it), for `nranks` ranks.
  /// `cache_limit`: peer allocations kept mapped (LOOM_CUDA_IPC_PEER_CACHE).
  static Result<std::unique_ptr<PeerReadRoute>> create(transport::DeviceTransport& transport,
                                                       transport::PeerBoard& board, int nranks,
                                                       std::size_t cache_limit);
  ~PeerReadRoute();  // waits (bounded) for its calls on the device, releasing stuck ones
  PeerReadRoute(const PeerReadRoute&) = delete;
  PeerReadRoute& operator=(const PeerReadRoute&) = delete;

  /// Enqueues the call's part on `stream` (see above) and returns the call's engine task, whose
  /// completion runs `on_done`. `fallback` makes the cuda_ipc FIFO task for the call.
  Result<std::unique_ptr<exec::Task>> submit(const coll::OpDesc& op, Stream stream,
                                             Deadline deadline, Fallback fallback,
                                             std::function<void()> on_done);

  /// The most calls on the device at once (then a call's task waits for the oldest).
  static constexpr std::size_t kMaxInFlight = 32;

 private:
  friend class PeerReadTask;
  struct InFlight {
    std::uint64_t ticket = 0;
    Event ready = nullptr;  // recorded on the caller's stream (its inputs)
    Event done = nullptr;
    Deadline deadline = Deadline::never();
    coll::OpDesc op;
  };
  PeerReadRoute(transport::DeviceTransport& transport, transport::PeerBoard& board, int nranks,
                std::size_t cache_limit, std::uint32_t* gate);

  [[nodiscard]] int rank() const { return transport_.rank(); }
  Result<PeerCard> make_card(const coll::OpDesc& op, std::uint64_t ticket);
  Result<Event> take_event();  // mu_ held
  void give_event(Event e);    // mu_ held
  void retire();               // mu_ held: calls whose event has passed
  /// Enqueues the call on the communicator's stream (mu_ held, failed_ ok).
  Status enqueue(PeerReadTask& task);
  /// Writes 4t+phase into every peer's inbox, then waits for it in every inbox of this rank.
  Status barrier(std::uint64_t ticket, std::uint32_t phase);
  /// Writes the gate and records the call as on the device from here (mu_ held); the route
  /// owns `ready` from then on.
  Status finish_on_stream(std::uint64_t ticket, const coll::OpDesc& op, Deadline deadline,
                          Event ready);
  /// PeerFailed for `peer`, which left the board (naming the rank whose failure it had seen).
  [[nodiscard]] Status peer_left(int peer, int cause, const std::string& what) const;
  /// A peer that left while this rank's stream still waits for its flags (-1: none; mu_ held).
  [[nodiscard]] int peer_gone_midway(int& cause) const;
  /// The route fails with `why`; calls from `from` on are abandoned (mu_ held).
  void fail(Status why, std::uint64_t from);
  /// A task that never enqueued its call (dropped or failed) gives its ticket up.
  void abandon(std::uint64_t ticket);
  void watch();    // the watchdog thread
  void release();  // unsticks the stream after a failure (watchdog; takes and drops mu_)
  [[nodiscard]] std::string flags_report() const;  // every peer's last flag seen here

  transport::DeviceTransport& transport_;
  transport::PeerBoard& board_;
  Device& dev_;
  int nranks_;
  std::uint32_t* gate_;  // pinned: the comm stream writes t, the callers' streams wait for it

  mutable std::mutex mu_;
  std::condition_variable cv_;  // the watchdog: calls in flight, a failure, stop
  ExportCache exports_;
  ImportCache imports_;
  std::vector<Event> events_;  // spare events
  std::deque<InFlight> in_flight_;
  std::uint64_t issued_ = 0;   // the last ticket submitted
  std::uint64_t retired_ = 0;  // every call up to here has finished on the device
  Status failed_;
  std::uint64_t failed_from_ = 0;
  bool released_ = false;
  bool stop_ = false;
  std::thread watchdog_;
};

/// Whether `op` is a call the route serves (peer_read_plan.hpp).
bool peer_read_serves(const coll::OpDesc& op);

}  // namespace loom::device
