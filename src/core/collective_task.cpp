#include "core/collective_task.hpp"

#include "algorithms/plan_index.hpp"
#include "core/task_host.hpp"
#include "kernels/host/reduce.hpp"

namespace loom::detail {

CollectiveTask::CollectiveTask(TaskHost& comm, coll::OpDesc op,
                               std::shared_ptr<const algo::Plan> plan, Deadline deadline)
    : comm_(comm), op_(std::move(op)), plan_(std::move(plan)), deadline_(deadline) {}

CollectiveTask::~CollectiveTask() {
  if (run_) comm_.recycle_run(std::move(run_));
}

Status CollectiveTask::start(Deadline deadline) {
  if (op_.p2p.recv_deferred) {  // see CallLedger::number_p2p
    op_.p2p.recv_seq = comm_.claim_receive(op_.p2p.from);
    op_.p2p.recv_deferred = false;
  }
  if (op_.kind != coll::CollKind::P2P)
    comm_.note_started(op_.seq);
  else
    comm_.note_p2p_started(op_);
  std::vector<int> listed;  // a cached plan's index lists its peers
  const std::vector<int>& peers = plan_->index ? plan_->index->peers : (listed = plan_->peers());
  Status st = comm_.connect(peers, deadline);
  if (!st.is_ok()) return comm_.name_failed_peer(st.with_context(describe()));
  run_ = comm_.reuse_run();
  std::vector<transport::Connection*>& conns = run_->connections();
  conns.assign(static_cast<std::size_t>(comm_.size()), nullptr);
  for (int p : peers) conns[static_cast<std::size_t>(p)] = comm_.connection(p);
  exec::PlanBuffers bufs;
  bufs.send = static_cast<std::uint8_t*>(const_cast<void*>(op_.send));
  if (op_.premultiplies()) bufs.send = premultiply(bufs.send, op_.send_bytes(comm_.size()));
  bufs.recv = static_cast<std::uint8_t*>(op_.recv);
  bufs.scratch = comm_.scratch(plan_->scratch_bytes);
  bufs.send_bytes = op_.send_bytes(comm_.size());
  bufs.recv_bytes = op_.recv_bytes(comm_.size());
  bufs.scratch_bytes = plan_->scratch_bytes;
  run_->reset(*plan_, std::move(bufs), op_, comm_.rank(), comm_.window());
  return Status::ok();
}

Result<exec::Progress> CollectiveTask::progress() {
  auto r = run_->progress();
  // Named here too: a failure the monitor reported first reaches the engine without its hook.
  if (!r.is_ok()) return comm_.name_failed_peer(r.status().with_context(describe()));
  if (*r == exec::Progress::Done) {
    // Every rank has finished its earlier calls: a message of one of them still unread was
    // sent by a mismatched call.
    if (op_.kind == coll::CollKind::Barrier && op_.seq > 0)
      LOOM_RETURN_IF_ERROR(comm_
                               .find_unread_messages(static_cast<std::int64_t>(op_.seq) - 1,
                                                     static_cast<std::int64_t>(op_.seq))
                               .with_context(describe()));
    finalize();
    if (op_.kind != coll::CollKind::P2P)
      comm_.note_completed(op_.seq);
    else
      comm_.note_p2p_completed(op_);
  }
  return r;
}

std::uint8_t* CollectiveTask::premultiply(std::uint8_t* send, std::size_t bytes) {
  const std::size_t count = bytes / dtype_size(op_.dtype);
  if (op_.in_place(comm_.rank())) {  // the result overwrites the input anyway
    kernels::scale(op_.dtype, send, send, count, op_.scalar);
    return send;
  }
  scaled_.resize(bytes);
  kernels::scale(op_.dtype, scaled_.data(), send, count, op_.scalar);
  return scaled_.data();
}

// Avg is a sum until here; every rank that holds a result divides its own copy.
void CollectiveTask::finalize() {
  if (!op_.divides_for_avg(comm_.rank())) return;
  kernels::finalize_avg(op_.dtype, op_.recv, op_.count, comm_.size());
}

bool CollectiveTask::prepare_wait(std::vector<pollfd>& fds) {
  return run_ ? run_->prepare_wait(fds) : false;
}

std::string CollectiveTask::describe() const {
  return fmt::format("rank {}: {} [{}]", comm_.rank(), coll::describe(op_), plan_->algorithm);
}

std::string CollectiveTask::pending() const {
  return run_ ? run_->pending() : "not started";
}

}  // namespace loom::detail
