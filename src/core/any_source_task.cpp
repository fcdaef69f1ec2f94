#include "core/any_source_task.hpp"

#include <fmt/format.h>

#include <optional>

#include "collective/tag.hpp"

namespace loom::detail {

AnySourceRecvTask::AnySourceRecvTask(TaskHost& comm, coll::OpDesc op, int* source,
                                     Deadline deadline)
    : comm_(comm), op_(std::move(op)), source_(source), deadline_(deadline) {
  next_look_ = (comm_.rank() + 1) % comm_.size();
}

Status AnySourceRecvTask::start(Deadline deadline) {
  std::vector<int> peers;
  for (int p = 0; p < comm_.size(); ++p)
    if (p != comm_.rank()) peers.push_back(p);
  // Every rank may be the sender: each takes part in this when it next connects to this rank
  // (its send to it does).
  comm_.note_p2p_started(op_);  // looking for its sender
  Status st = comm_.connect(peers, deadline);
  if (!st.is_ok()) return comm_.name_failed_peer(st.with_context(describe()));
  for (int p : peers) {
    const transport::Connection* c = comm_.connection(p);
    if (c == nullptr || !c->caps().peeks)
      return make_error(ErrorCode::InvalidUsage,
                        "{}: rank {} is reached over {}, which cannot look at a message before "
                        "receiving it; receive from a named rank instead",
                        describe(), p, c == nullptr ? std::string("no connection") : c->name());
  }
  return Status::ok();
}

int AnySourceRecvTask::find_sender() {
  const int n = comm_.size();
  for (int i = 0; i < n; ++i) {
    const int p = (next_look_ + i) % n;
    if (p == comm_.rank()) continue;
    const std::optional<transport::Unread> u = comm_.connection(p)->peek_unread();
    // Another kind, tag or number: a message for a later call of this rank, not this one.
    if (!u || u->tag.kind != static_cast<std::uint8_t>(coll::CollKind::P2P) ||
        u->tag.root != op_.p2p.tag || u->tag.seq != comm_.next_receive(p))
      continue;
    next_look_ = (p + 1) % n;
    return p;
  }
  return -1;
}

Status AnySourceRecvTask::receive_from(int peer) {
  op_.p2p.from = peer;
  op_.p2p.any_source = false;
  op_.p2p.recv_seq = comm_.claim_receive(peer);
  if (source_ != nullptr) *source_ = peer;
  auto plan = std::make_shared<algo::Plan>();
  plan->algorithm = "p2p (any source)";
  plan->add(algo::recv_from(peer, {algo::BufId::Recv, 0, op_.recv_bytes(comm_.size())}));
  receive_ = std::make_unique<CollectiveTask>(comm_, op_, std::move(plan), deadline_);
  return receive_->start(deadline_);
}

Result<exec::Progress> AnySourceRecvTask::progress() {
  if (!receive_) {
    const int from = find_sender();
    if (from < 0) return exec::Progress::Idle;
    LOOM_RETURN_IF_ERROR(receive_from(from));
  }
  return receive_->progress();
}

bool AnySourceRecvTask::prepare_wait(std::vector<pollfd>& fds) {
  if (receive_) return receive_->prepare_wait(fds);
  // No connection announces a message nobody receives yet: look again after a nap.
  transport::want_timed_wakeup(fds);
  return true;
}

std::string AnySourceRecvTask::describe() const {
  if (receive_) return receive_->describe();
  return fmt::format("rank {}: {}", comm_.rank(), coll::describe(op_));
}

std::string AnySourceRecvTask::pending() const {
  if (receive_) return receive_->pending();
  return fmt::format("no rank has sent a message with tag {} to this rank", op_.p2p.tag);
}

}  // namespace loom::detail
