// A small collective through the communicator's arena (transports/arena.hpp), in one step: once
// every rank has published the call before (so its slot is free), every rank writes its input to
// its slot (a broadcast's root its data, the others nothing; a pre-multiplied sum's input scaled
// first), waits until the slots it needs hold the same call (a broadcast's root and a reduce's
// other ranks need none), and computes its own result from them: reductions fold them in rank
// order, ((x0 op x1) op x2) ..., the order LOOM_DETERMINISTIC uses, so every rank computes the
// same bits; allgather, alltoall and broadcast copy. A slot holding another call is a Mismatch
// naming both ranks and both calls: the slots a call reads are checked at once; when a call did not
// read every rank's slot (a broadcast's root, a reduce's other ranks), the others' slots of it are
// checked when the next call starts (or when the communicator is idle).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collective/op.hpp"
#include "core/task_host.hpp"
#include "executor/task.hpp"
#include "transports/arena.hpp"

namespace loom::detail {

/// The collectives the arena serves: allreduce, reduce, reduce_scatter, allgather, broadcast,
/// alltoall and barrier. Not gather and scatter: their messages already take one step, and the
/// arena's lockstep (a rank at most one call ahead) made them 1.3-2.5x slower at 4-8 ranks
/// sharing CPUs (docs/performance.md); not alltoallv: its counts are each rank's own.
bool arena_serves(coll::CollKind kind);
/// The bytes rank `rank` writes to its slot for `op` on `nranks` ranks.
std::size_t arena_slot_bytes(const coll::OpDesc& op, int rank, int nranks);
/// Compares the call before the arena's current one on every rank that has published it with
/// this rank's (Mismatch naming both ranks and both calls). Non-blocking; a rank that has not
/// published it yet is skipped.
Status check_previous_arena_call(const transport::Arena& arena, int rank, int nranks);
/// Whether every rank has published the arena call before the current one, so this rank's slot
/// is free again (true before the first call); then checks them (check_previous_arena_call).
/// Non-blocking: resumes from and advances `next` (the ranks below have published it).
Result<bool> arena_previous_done(const transport::Arena& arena, int rank, int nranks, int& next);
/// Rank `peer`'s slot of the current call once it has published it (null before); Mismatch
/// naming both ranks and both calls when the slot holds another call than `expected` or other
/// than `want` bytes.
Result<const std::uint8_t*> arena_peer_slot(const transport::Arena& arena, int rank, int peer,
                                            const coll::Tag& expected, std::size_t want);

class ArenaTask final : public exec::Task {
 public:
  /// The algorithm name the call ledger, logs and errors give these calls.
  static constexpr const char* kAlgorithm = "oneshot";

  /// `yield`: the engine's yield phase for this call (ranks that share CPUs yield longer).
  ArenaTask(TaskHost& comm, transport::Arena& arena, coll::OpDesc op, Deadline deadline,
            std::chrono::microseconds yield);

  /// This finished task, made the next call's (its slot vector kept): `submitted` is when that
  /// call was made. Such a call tells the call ledger of itself once, when it finishes (or when
  /// the engine queues it: queued()); a task made by the constructor, at start and at the end.
  void reuse(const coll::OpDesc& op, Deadline deadline, Clock::time_point submitted);

  Status start(Deadline deadline) override;
  void queued() override;
  Result<exec::Progress> progress() override;
  bool prepare_wait(std::vector<pollfd>& fds) override;
  [[nodiscard]] std::string describe() const override;
  [[nodiscard]] std::string pending() const override;
  [[nodiscard]] Deadline deadline() const override { return deadline_; }
  [[nodiscard]] std::optional<std::chrono::microseconds> yield() const override { return yield_; }

 private:
  /// Waits until every rank has published the previous call (checking it), then publishes
  /// this rank's input.
  Result<bool> publish_when_free();
  /// Whether this rank reads `peer`'s slot of this call.
  [[nodiscard]] bool needs(int peer) const;
  /// Whether it reads every other rank's slot (then the next call need not check them).
  [[nodiscard]] bool reads_every_slot() const;
  /// Sets what the call's slots hold (tag_, bytes_), once per call.
  void set_call();
  /// The bytes rank `rank` writes to its slot for this call (arena_slot_bytes).
  [[nodiscard]] std::size_t slot_bytes(int rank) const;
  /// Every slot needed is there: this rank's result.
  void compute();

  TaskHost& comm_;
  transport::Arena& arena_;
  coll::OpDesc op_;
  Deadline deadline_;
  std::chrono::microseconds yield_;
  coll::Tag tag_;                  // the call's, in every slot it reads or writes
  std::size_t bytes_ = 0;          // each slot's bytes (a broadcast's: the root's)
  Clock::time_point submitted_{};  // when the call was made (reuse())
  bool recorded_ = true;           // the call ledger has it (else: note_ran when it finishes)
  bool started_ = false;
  bool published_ = false;  // this rank's input is in its slot
  int next_ = 0;            // ranks below have published the call awaited (previous, then this)
  std::vector<const void*> slots_;  // by rank: the slots this call reads (its own too)
};

}  // namespace loom::detail
