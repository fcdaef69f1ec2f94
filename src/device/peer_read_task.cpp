#include "device/peer_read_task.hpp"

#include <fmt/format.h>

#include "log/log.hpp"

namespace loom::device {
namespace {

// The call a peer's card describes, for messages.
coll::OpDesc as_op(const PeerCard& c) {
  coll::OpDesc op;
  op.kind = static_cast<coll::CollKind>(c.kind);
  op.dtype = static_cast<DataType>(c.dtype);
  op.redop = static_cast<RedOp>(c.op);
  op.root = c.root;
  op.count = static_cast<std::size_t>(c.count);
  op.seq = c.seq;
  return op;
}

}  // namespace

PeerReadTask::~PeerReadTask() {
  if (!enqueued_) route_.abandon(card_.ticket);
  std::lock_guard lk(route_.mu_);
  if (ready_) route_.give_event(ready_);
}

Status PeerReadTask::start(Deadline) {
  return Status::ok();
}

Status PeerReadTask::check_match(int peer, const PeerCard& theirs) const {
  const bool same = theirs.seq == card_.seq && theirs.kind == card_.kind &&
                    theirs.dtype == card_.dtype && theirs.count == card_.count &&
                    (!op_.has_redop() || theirs.op == card_.op) &&
                    (!op_.has_root() || theirs.root == card_.root);
  if (same) return Status::ok();
  return Status(ErrorCode::Mismatch,
                fmt::format("rank {}: {}: rank {} made {} as its call {} on the peer-read route",
                            route_.rank(), coll::describe(op_), peer, coll::describe(as_op(theirs)),
                            card_.ticket))
      .with_peer(peer);
}

Result<bool> PeerReadTask::collect() {
  for (int p = 0; p < route_.nranks_; ++p) {
    const auto up = static_cast<std::size_t>(p);
    if (got_[up]) continue;
    if (p == route_.rank()) {
      cards_[up] = card_;
    } else {
      if (!route_.board_.read(p, card_.ticket, cards_[up])) {
        missing_ = p;
        if (int cause = -1; route_.board_.closed(p, cause))
          return route_.peer_left(p, cause, describe());
        return false;
      }
      LOOM_RETURN_IF_ERROR(check_match(p, cards_[up]));
    }
    got_[up] = true;
  }
  missing_ = -1;
  return true;
}

Result<exec::Progress> PeerReadTask::progress() {
  auto ctx = [&](const Status& st) { return st.with_context(describe()); };
  if (Status st = route_.dev_.set_device(route_.transport_.device_ordinal()); !st.is_ok())
    return ctx(st);
  if (stage_ == Stage::Post) {
    {
      std::lock_guard lk(route_.mu_);
      if (!route_.failed_.is_ok()) return route_.failed_;
    }
    if (!route_.board_.post(card_)) return exec::Progress::Idle;  // a peer is far behind
    stage_ = Stage::Collect;
  }
  if (stage_ == Stage::Collect) {
    auto all = collect();
    if (!all.is_ok()) return all.status();
    if (!*all) return exec::Progress::Idle;
    bool shared = true;
    for (const PeerCard& c : cards_) shared = shared && (c.flags & PeerCard::kUnexportable) == 0;
    stage_ = shared ? Stage::Enqueue : Stage::Fallback;
    if (!shared)
      LOOM_LOG_DEBUG(Cuda, "{}: a rank's buffers cannot be shared: through the cuda_ipc FIFOs",
                     describe());
  }
  if (stage_ == Stage::Fallback) return run_fallback();
  std::lock_guard lk(route_.mu_);
  if (!route_.failed_.is_ok()) return route_.failed_;
  route_.retire();
  if (route_.in_flight_.size() >= PeerReadRoute::kMaxInFlight) return exec::Progress::Idle;
  if (Status st = route_.enqueue(*this); !st.is_ok()) {
    route_.fail(ctx(st), card_.ticket);
    return ctx(st);
  }
  enqueued_ = true;
  done();
  return exec::Progress::Done;
}

Result<exec::Progress> PeerReadTask::run_fallback() {
  auto ctx = [&](const Status& st) { return st.with_context(describe()); };
  if (!inner_) {
    inner_ = fallback_();
    // The FIFO pieces are copied on the communicator's stream: after the caller's inputs.
    Status st = route_.dev_.wait_event(route_.transport_.stream(), ready_);
    if (st.is_ok()) st = inner_->start(deadline_);
    if (!st.is_ok()) return ctx(st);
  }
  auto r = inner_->progress();
  if (!r.is_ok() || *r != exec::Progress::Done) return r;
  std::lock_guard lk(route_.mu_);
  if (!route_.failed_.is_ok()) return route_.failed_;  // the host has opened the gates
  if (Status st = route_.finish_on_stream(card_.ticket, op_, deadline_, take_ready());
      !st.is_ok()) {
    route_.fail(ctx(st), card_.ticket);
    return ctx(st);
  }
  enqueued_ = true;
  done();
  return exec::Progress::Done;
}

void PeerReadTask::done() {
  stage_ = Stage::Done;
  if (on_done_) on_done_();
}

bool PeerReadTask::prepare_wait(std::vector<pollfd>& fds) {
  if (stage_ == Stage::Fallback && inner_) return inner_->prepare_wait(fds);
  return true;  // shared memory and the device: nothing to poll, the engine naps
}

std::string PeerReadTask::describe() const {
  return fmt::format("rank {}: {} [peer-read route, call {}]", route_.rank(), coll::describe(op_),
                     card_.ticket);
}

std::string PeerReadTask::pending() const {
  switch (stage_) {
    case Stage::Post:
      return "waiting for the peers to read this rank's earlier calls (its board is full)";
    case Stage::Collect:
      return fmt::format("waiting for rank {} to make this call (its card of call {})", missing_,
                         card_.ticket);
    case Stage::Enqueue:
      return fmt::format("waiting for the oldest of {} calls on the device to finish ({})",
                         PeerReadRoute::kMaxInFlight, route_.flags_report());
    case Stage::Fallback: return inner_ ? inner_->pending() : "starting the cuda_ipc FIFO task";
    case Stage::Done: break;
  }
  return "done";
}

}  // namespace loom::device
