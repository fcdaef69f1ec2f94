// Stream-ordered collectives on device buffers (NCCL semantics): the call enqueues work on the
// caller's stream and returns; the stream's later work sees the result.
//
// How: the inputs are copied device -> pinned host staging on the stream, followed by an event
// the engine polls before it starts the collective on the staging buffers (so the collective
// never reads inputs the stream has not produced yet). Then a host function on the stream (the
// "gate") holds the stream until the engine has finished the collective, and the result is
// copied staging -> device on the stream. A staging buffer returns to the pool when an event
// recorded after that copy has completed.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "collective/op.hpp"
#include "device/device.hpp"
#include "executor/task.hpp"

namespace loom::device {

/// Decides whether a call runs stream-ordered: yes when a stream was given or a buffer is device
/// memory. Mixing host and device buffers in one call is InvalidArgument naming both buffers; a
/// stream without an active device runtime is InvalidArgument too. `dev` may be null.
Result<bool> needs_stream_path(Device* dev, const coll::OpDesc& op, int rank, int nranks,
                               void* stream);

/// The word that wait-value gates (LOOM_STREAM_GATE=wait-value) hold their streams on: gate t
/// (its ticket) is open once the word has reached t. Gates may open in any order (a call that
/// fails early), but the word advances only over the contiguous run of open tickets, so that
/// opening a gate never releases an earlier gate's stream.
class GateLine {
 public:
  /// The word in pinned host memory, checked once on a stream of its own (InvalidUsage where
  /// the runtime or the device has no stream memory operations).
  static Result<std::shared_ptr<GateLine>> create(Device& dev, Deadline deadline);
  GateLine(Device& dev, std::uint32_t* word) : dev_(dev), word_(word) {}
  ~GateLine();
  GateLine(const GateLine&) = delete;
  GateLine& operator=(const GateLine&) = delete;

  /// The next gate's ticket (1, 2, ...).
  std::uint64_t take();
  /// Ticket `t` is open; the word moves on when every earlier one is open too.
  void open(std::uint64_t t);
  [[nodiscard]] const std::uint32_t* word() const { return word_; }

 private:
  Device& dev_;
  std::uint32_t* word_;  // pinned: the host writes it, the streams wait on it
  std::mutex mu_;
  std::uint64_t next_ = 1;
  std::uint64_t done_ = 0;         // every ticket up to here is open
  std::set<std::uint64_t> early_;  // open tickets after a closed one
};

/// Opens once (at the latest when destroyed): the stream's gate waits for it, a host function
/// on the stream (bounded by its deadline), or with a GateLine, the stream itself on the line's
/// word.
class Gate {
 public:
  explicit Gate(Deadline deadline) : deadline_(deadline) {}
  Gate(Deadline deadline, std::shared_ptr<GateLine> line)
      : deadline_(deadline), line_(std::move(line)), ticket_(line_->take()) {}
  ~Gate() { open(); }
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;
  void open();
  /// Blocks until open() or the deadline; true if opened.
  bool wait();
  /// Null: a host-function gate.
  [[nodiscard]] const GateLine* line() const { return line_.get(); }
  /// The word's value that opens a wait-value gate.
  [[nodiscard]] std::uint32_t value() const { return static_cast<std::uint32_t>(ticket_); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
  Deadline deadline_;
  std::shared_ptr<GateLine> line_;
  std::uint64_t ticket_ = 0;
};

/// Pinned host buffers reused across calls; a buffer is free again once the stream has passed
/// the event recorded after its last use.
class StagingPool {
 public:
  struct Buffer {
    void* ptr = nullptr;
    std::size_t bytes = 0;
    Event released = nullptr;
    bool busy = false;
  };
  StagingPool(Device& dev, std::chrono::milliseconds drain_timeout)
      : dev_(dev), drain_timeout_(drain_timeout) {}
  ~StagingPool();
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  /// At most kMaxBuffers buffers exist; when all are in flight, waits (until `deadline`) for
  /// the stream to release one.
  Result<Buffer*> acquire(std::size_t bytes, Deadline deadline);
  /// Marks `b` free once the work enqueued on `s` so far has completed.
  Status release(Buffer* b, Stream s);
  [[nodiscard]] std::size_t buffers() const { return buffers_.size(); }

 private:
  /// Waits (bounded) for the streams to release every buffer, then frees them.
  void drain();

  static constexpr std::size_t kMaxBuffers = 4;
  Device& dev_;
  std::chrono::milliseconds drain_timeout_;
  std::vector<std::unique_ptr<Buffer>> buffers_;
  // Buffers outgrown by growth, freed at drain(): a free (cudaFreeHost) waits for the whole
  // device, where a caller's stream may be held by an earlier collective's stream gate.
  std::vector<void*> outgrown_;
};

/// One staged call: the host-side op (pointers into staging), its gate and the events.
struct StagedCall {
  coll::OpDesc host_op;
  StagingPool::Buffer* staging = nullptr;
  Event inputs_ready = nullptr;  // owned by the StagedTask
  std::shared_ptr<Gate> gate;
  void* device_recv = nullptr;  // where the result goes (null: this rank has no output)
  std::size_t recv_bytes = 0;
};

/// A group's sends and receives staged together (one staging buffer, one stream): each call on
/// its part of the staging buffer, and one inputs-ready event and gate for all of them.
struct StagedGroup {
  std::vector<coll::OpDesc> host_ops;  // the calls, in order, on staging buffers
  StagedCall shared;                   // staging, event and gate (host_op and recv unused)
  struct ResultCopy {
    void* device;
    const void* host;
    std::size_t bytes;
  };
  std::vector<ResultCopy> results;  // staging -> device copies, after the group
};

class StreamPath {
 public:
  /// `gate_line`: hold streams with wait-value gates on it; null: with host functions.
  StreamPath(Device& dev, std::chrono::milliseconds timeout,
             std::shared_ptr<GateLine> gate_line = nullptr)
      : dev_(dev), pool_(dev, timeout), line_(std::move(gate_line)) {}

  [[nodiscard]] Device& device() const { return dev_; }
  /// Enqueues the input copies and the inputs-ready event on `stream`.
  Result<StagedCall> stage(const coll::OpDesc& op, int rank, int nranks, Stream stream,
                           Deadline deadline);
  /// stage() for a group's sends and receives (CollKind::P2P) on one stream, so that one task
  /// runs them side by side; wrap() its `shared` call, then finish_group().
  Result<StagedGroup> stage_group(const std::vector<coll::OpDesc>& ops, int rank, int nranks,
                                  Stream stream, Deadline deadline);
  /// For the direct path (direct_path.hpp): no staging, `host_op` is `op` itself; only the
  /// inputs-ready event is recorded on `stream` (and the gate made).
  Result<StagedCall> direct(const coll::OpDesc& op, int rank, Stream stream, Deadline deadline);
  /// Wraps the collective on the staging buffers so that it starts when the inputs are ready
  /// and opens the gate when it ends (successfully or not, or when it is dropped).
  std::unique_ptr<exec::Task> wrap(std::unique_ptr<exec::Task> inner, const StagedCall& call);
  /// Enqueues the gate, the result copy and the staging release on `stream` (only the gate for
  /// a direct call); an error names `rank` and the call.
  Status finish(const StagedCall& call, int rank, Stream stream);
  /// finish() for a staged group: the gate, every result copy, the staging release.
  Status finish_group(const StagedGroup& group, int rank, Stream stream);
  [[nodiscard]] std::size_t staging_buffers() const { return pool_.buffers(); }

 private:
  /// A gate of this path's kind, opened at the latest when the call's task is dropped.
  std::shared_ptr<Gate> make_gate(Deadline deadline) const;
  /// Holds `stream` until `gate` opens (a host function on the stream, or a wait on the word).
  Status enqueue_gate(const std::shared_ptr<Gate>& gate, Stream stream);

  Device& dev_;
  StagingPool pool_;
  std::shared_ptr<GateLine> line_;  // LOOM_STREAM_GATE=wait-value
};

}  // namespace loom::device
