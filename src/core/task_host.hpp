// What a running call's task needs from its communicator, and nothing more: the tasks
// (collective_task.*, group_tasks.*) see this interface, never CommImpl, so calls go one way
// (the communicator queues tasks; tasks use connections, scratch and the failure bookkeeping
// through here).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "collective/op.hpp"
#include "common/deadline.hpp"
#include "common/status.hpp"
#include "executor/plan_run.hpp"
#include "transports/connection.hpp"

namespace loom::detail {

class TaskHost {
 public:
  virtual ~TaskHost() = default;
  [[nodiscard]] virtual int rank() const = 0;
  [[nodiscard]] virtual int size() const = 0;
  /// Connections to every peer in `peers`, established on first use.
  virtual Status connect(const std::vector<int>& peers, Deadline deadline) = 0;
  [[nodiscard]] virtual transport::Connection* connection(int peer) const = 0;
  /// The communicator's scratch buffer, at least `bytes` long (valid until the next call).
  virtual std::uint8_t* scratch(std::size_t bytes) = 0;
  /// Requests in flight per peer and direction.
  [[nodiscard]] virtual std::size_t window() const = 0;
  /// Collective call `seq` started running / completed successfully (the call ledger).
  virtual void note_started(std::uint64_t seq) = 0;
  virtual void note_completed(std::uint64_t seq) = 0;
  /// A call that deferred its bookkeeping while it might finish on the caller's thread, made at
  /// `submitted`, to run as `algorithm`: queued after all (then note_started, note_completed) /
  /// finished there (submitted, started and completed in one update).
  virtual void note_submitted(const coll::OpDesc& op, const char* algorithm,
                              Clock::time_point submitted) = 0;
  virtual void note_ran(const coll::OpDesc& op, const char* algorithm,
                        Clock::time_point submitted) = 0;
  /// A send / receive (op.p2p.record) started running, with its receive numbered / completed.
  virtual void note_p2p_started(const coll::OpDesc& op) = 0;
  virtual void note_p2p_completed(const coll::OpDesc& op) = 0;
  /// A PeerFailed naming a peer, with the peer's host and pid added (else unchanged).
  [[nodiscard]] virtual Status name_failed_peer(const Status& why) const = 0;
  /// Mismatch when a connection holds a message no call will take: one of a collective up to
  /// #finished that this rank finished, or a send its sender issued before its collective
  /// #reached, this rank having finished every call it issued before its own (-1: none).
  virtual Status find_unread_messages(std::int64_t finished, std::int64_t reached) = 0;
  /// Receives numbered as they start (a receive from any source, and those submitted while one
  /// was unnumbered: CallLedger::number_p2p): the number the next receive from `peer` takes,
  /// and taking it.
  [[nodiscard]] virtual std::uint64_t next_receive(int peer) const = 0;
  virtual std::uint64_t claim_receive(int peer) = 0;
  /// A run to start the next call's plan in: the last one given back (its vectors keep their
  /// storage, so a small call allocates nothing for its run), or a new one.
  virtual std::unique_ptr<exec::PlanRun> reuse_run() = 0;
  /// Gives a finished run back for reuse_run (cheap, never blocks: callable under the engine's
  /// lock; a run given back while one is kept is freed).
  virtual void recycle_run(std::unique_ptr<exec::PlanRun> run) = 0;
};

}  // namespace loom::detail
