// A receive from any source (Communicator::recv_any) as an executor Task. Operations run in
// submission order, so when it starts every earlier receive has completed and the first unread
// message on each connection is the next one from that peer. It connects to every other rank,
// then looks at those first messages until one is the next point-to-point message from its
// rank with the receive's tag; from then on it is that rank's receive (a CollectiveTask).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "collective/op.hpp"
#include "core/collective_task.hpp"
#include "core/task_host.hpp"
#include "executor/task.hpp"

namespace loom::detail {

class AnySourceRecvTask final : public exec::Task {
 public:
  /// `op`: a receive with p2p.any_source set. `*source` (if not null) is set to the
  /// sender's rank before the task completes.
  AnySourceRecvTask(TaskHost& comm, coll::OpDesc op, int* source, Deadline deadline);

  Status start(Deadline deadline) override;
  Result<exec::Progress> progress() override;
  bool prepare_wait(std::vector<pollfd>& fds) override;
  [[nodiscard]] std::string describe() const override;
  [[nodiscard]] std::string pending() const override;
  [[nodiscard]] Deadline deadline() const override { return deadline_; }

 private:
  /// The rank whose next message to this rank is the one to take, or -1 if none has come yet.
  int find_sender();
  Status receive_from(int peer);

  TaskHost& comm_;
  coll::OpDesc op_;
  int* source_;
  Deadline deadline_;
  int next_look_ = 0;  // where the next search starts: senders take turns
  std::unique_ptr<CollectiveTask> receive_;
};

}  // namespace loom::detail
