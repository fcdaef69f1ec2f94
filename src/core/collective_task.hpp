// One collective as an executor Task: a Plan plus the buffers and connections it runs on.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "algorithms/plan.hpp"
#include "collective/op.hpp"
#include "core/task_host.hpp"
#include "executor/plan_run.hpp"
#include "executor/task.hpp"

namespace loom::detail {

class CollectiveTask final : public exec::Task {
 public:
  CollectiveTask(TaskHost& comm, coll::OpDesc op, std::shared_ptr<const algo::Plan> plan,
                 Deadline deadline);
  ~CollectiveTask() override;
  CollectiveTask(const CollectiveTask&) = delete;
  CollectiveTask& operator=(const CollectiveTask&) = delete;

  Status start(Deadline deadline) override;
  Result<exec::Progress> progress() override;
  bool prepare_wait(std::vector<pollfd>& fds) override;
  [[nodiscard]] std::string describe() const override;
  [[nodiscard]] std::string pending() const override;
  [[nodiscard]] Deadline deadline() const override { return deadline_; }

 private:
  void finalize();
  /// PreMulSum: the input multiplied by the scalar (in place: the buffer itself; otherwise a
  /// copy, so that the caller's input stays as it was). Returns the send buffer to use.
  std::uint8_t* premultiply(std::uint8_t* send, std::size_t bytes);

  TaskHost& comm_;
  coll::OpDesc op_;
  std::shared_ptr<const algo::Plan> plan_;  // shared with the communicator's plan cache
  Deadline deadline_;
  std::unique_ptr<exec::PlanRun> run_;  // from and back to TaskHost::reuse_run
  std::vector<std::uint8_t> scaled_;    // PreMulSum out of place: the scaled input
};

}  // namespace loom::detail
