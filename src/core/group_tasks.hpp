// The operations that carry a group's calls (see group.cpp): allreduces fused into one over a
// packed buffer, and sends and receives run side by side in one plan.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "algorithms/plan.hpp"
#include "collective/op.hpp"
#include "core/collective_task.hpp"
#include "core/task_host.hpp"
#include "executor/plan_run.hpp"
#include "executor/task.hpp"

namespace loom::detail {

/// One member of a fused allreduce: its buffers and its place in the packed buffer.
struct FusedPiece {
  const void* send = nullptr;
  void* recv = nullptr;
  std::size_t offset = 0;  // bytes into the packed buffer
  std::size_t bytes = 0;
};

/// Makes the task that runs a call (its route chosen already) for the call's buffers.
using TaskMaker = std::function<std::unique_ptr<exec::Task>(const coll::OpDesc&)>;

/// Copies every member's input into a packed buffer, runs one allreduce over it on the route a
/// single call of that size takes (`make`: the arena in one step or in pieces, or a plan's
/// messages), and copies each member's part of the result out. The packed buffer lives from the
/// start of the task to its end only (operations run one at a time, so calls queued ahead hold
/// none), and `op`'s buffers are replaced by it at the start.
class FusedAllreduceTask final : public exec::Task {
 public:
  FusedAllreduceTask(TaskHost& comm, const coll::OpDesc& op, std::vector<FusedPiece> pieces,
                     TaskMaker make, std::string algorithm, Deadline deadline);

  Status start(Deadline deadline) override;
  Result<exec::Progress> progress() override;
  bool prepare_wait(std::vector<pollfd>& fds) override;
  [[nodiscard]] std::string describe() const override;
  [[nodiscard]] std::string pending() const override;
  [[nodiscard]] Deadline deadline() const override;
  [[nodiscard]] std::optional<std::chrono::microseconds> yield() const override;

 private:
  TaskHost& comm_;
  coll::OpDesc op_;
  std::vector<FusedPiece> pieces_;
  TaskMaker make_;
  std::string algorithm_;
  Deadline deadline_;
  std::unique_ptr<std::uint8_t[]> packed_;
  std::unique_ptr<exec::Task> inner_;
  bool finished_ = false;
};

/// A group's sends and receives as one plan over the callers' buffers: every message is posted
/// at once, so two ranks that both send before they receive do not wait for each other. Each
/// message carries its own call's tag.
class P2PBatchTask final : public exec::Task {
 public:
  P2PBatchTask(TaskHost& comm, std::vector<coll::OpDesc> calls, Deadline deadline);

  Status start(Deadline deadline) override;
  Result<exec::Progress> progress() override;
  bool prepare_wait(std::vector<pollfd>& fds) override;
  [[nodiscard]] std::string describe() const override;
  [[nodiscard]] std::string pending() const override;
  [[nodiscard]] Deadline deadline() const override { return deadline_; }

 private:
  void tag_steps();

  TaskHost& comm_;
  std::vector<coll::OpDesc> calls_;
  Deadline deadline_;
  algo::Plan plan_;
  std::vector<coll::Tag> tags_;
  exec::PlanBuffers bufs_;
  std::optional<exec::PlanRun> run_;
};

}  // namespace loom::detail
