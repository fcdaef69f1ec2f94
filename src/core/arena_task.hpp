// A small collective through the communicator's arena (transports/arena.hpp), in one step: every
// rank writes its input to its slot (a broadcast's root its data, the others nothing; a
// pre-multiplied sum's input scaled first), waits until every rank's slot holds the same call,
// and computes its own result from the slots: reductions fold them in rank order,
// ((x0 op x1) op x2) ..., the order LOOM_DETERMINISTIC uses, so every rank computes the same
// bits; allgather and broadcast copy. A slot holding another call is a Mismatch naming both
// ranks and both calls.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collective/op.hpp"
#include "core/task_host.hpp"
#include "executor/task.hpp"
#include "transports/arena.hpp"

namespace loom::detail {

/// The collectives the arena serves: allreduce, reduce, reduce_scatter, allgather, broadcast and
/// barrier.
bool arena_serves(coll::CollKind kind);
/// The bytes rank `rank` writes to its slot for `op` on `nranks` ranks.
std::size_t arena_slot_bytes(const coll::OpDesc& op, int rank, int nranks);

class ArenaTask final : public exec::Task {
 public:
  /// The algorithm name the call ledger, logs and errors give these calls.
  static constexpr const char* kAlgorithm = "oneshot";

  /// `yield`: the engine's yield phase for this call (ranks that share CPUs yield longer).
  ArenaTask(TaskHost& comm, transport::Arena& arena, coll::OpDesc op, Deadline deadline,
            std::chrono::microseconds yield);

  Status start(Deadline deadline) override;
  Result<exec::Progress> progress() override;
  bool prepare_wait(std::vector<pollfd>& fds) override;
  [[nodiscard]] std::string describe() const override;
  [[nodiscard]] std::string pending() const override;
  [[nodiscard]] Deadline deadline() const override { return deadline_; }
  [[nodiscard]] std::optional<std::chrono::microseconds> yield() const override { return yield_; }

 private:
  /// Every slot is there: this rank's result.
  void compute();

  TaskHost& comm_;
  transport::Arena& arena_;
  coll::OpDesc op_;
  Deadline deadline_;
  std::chrono::microseconds yield_;
  int next_ = 0;  // ranks below have published this call
  std::vector<const std::uint8_t*> slots_;
};

}  // namespace loom::detail
