#include "core/group_tasks.hpp"

#include <fmt/format.h>

#include <cstring>

#include "core/task_host.hpp"

namespace loom::detail {

FusedAllreduceTask::FusedAllreduceTask(TaskHost& comm, const coll::OpDesc& op,
                                       std::vector<FusedPiece> pieces, TaskMaker make,
                                       std::string algorithm, Deadline deadline)
    : comm_(comm),
      op_(op),
      pieces_(std::move(pieces)),
      make_(std::move(make)),
      algorithm_(std::move(algorithm)),
      deadline_(deadline) {}

Status FusedAllreduceTask::start(Deadline deadline) {
  const std::size_t bytes = op_.count * dtype_size(op_.dtype);
  packed_ = std::make_unique_for_overwrite<std::uint8_t[]>(bytes);  // every byte packed below
  op_.send = packed_.get();
  op_.recv = packed_.get();
  for (const FusedPiece& p : pieces_) std::memcpy(packed_.get() + p.offset, p.send, p.bytes);
  inner_ = make_(op_);
  return inner_->start(deadline);
}

Result<exec::Progress> FusedAllreduceTask::progress() {
  auto r = inner_->progress();
  if (r.is_ok() && *r == exec::Progress::Done) {
    for (const FusedPiece& p : pieces_) std::memcpy(p.recv, packed_.get() + p.offset, p.bytes);
    finished_ = true;
    inner_.reset();  // nothing refers to the packed buffer any more
    packed_.reset();
  }
  return r;
}

bool FusedAllreduceTask::prepare_wait(std::vector<pollfd>& fds) {
  return inner_ ? inner_->prepare_wait(fds) : false;
}

Deadline FusedAllreduceTask::deadline() const {
  return deadline_;
}

std::optional<std::chrono::microseconds> FusedAllreduceTask::yield() const {
  return inner_ ? inner_->yield() : std::nullopt;
}

std::string FusedAllreduceTask::describe() const {
  std::string counts;
  const std::size_t es = dtype_size(op_.dtype);
  for (std::size_t i = 0; i < pieces_.size() && i < 8; ++i)
    counts += fmt::format("{}{}", i ? " + " : "", pieces_[i].bytes / es);
  if (pieces_.size() > 8) counts += " + ...";
  return fmt::format("rank {}: {} [{}] (a group of {} allreduce calls fused: {} elements)",
                     comm_.rank(), coll::describe(op_), algorithm_, pieces_.size(), counts);
}

std::string FusedAllreduceTask::pending() const {
  if (finished_) return "done";
  return inner_ ? inner_->pending() : "not started";
}

P2PBatchTask::P2PBatchTask(TaskHost& comm, std::vector<coll::OpDesc> calls, Deadline deadline)
    : comm_(comm), calls_(std::move(calls)), deadline_(deadline) {
  plan_.algorithm = "p2p group";
  for (const coll::OpDesc& c : calls_) {
    const std::size_t send_bytes = c.send_bytes(comm.size());
    const std::size_t recv_bytes = c.recv_bytes(comm.size());
    const auto buf = [&](std::uint8_t* p, std::size_t bytes) {
      bufs_.extra.push_back({p, bytes});
      return exec::extra_buf(bufs_.extra.size() - 1);
    };
    if (c.p2p.to >= 0) {
      auto* p = static_cast<std::uint8_t*>(const_cast<void*>(c.send));
      plan_.add(algo::send_to(c.p2p.to, {buf(p, send_bytes), 0, send_bytes}));
    }
    if (c.p2p.from >= 0) {
      plan_.add(algo::recv_from(
          c.p2p.from, {buf(static_cast<std::uint8_t*>(c.recv), recv_bytes), 0, recv_bytes}));
    }
  }
}

// The steps' tags, in the plan's order; receives deferred by CallLedger::number_p2p are
// numbered now.
void P2PBatchTask::tag_steps() {
  tags_.clear();
  for (coll::OpDesc& c : calls_) {
    if (c.p2p.recv_deferred) {
      c.p2p.recv_seq = comm_.claim_receive(c.p2p.from);
      c.p2p.recv_deferred = false;
    }
    if (c.p2p.to >= 0) tags_.push_back(coll::message_tag(c, true, 0));
    if (c.p2p.from >= 0) tags_.push_back(coll::message_tag(c, false, 0));
  }
}

Status P2PBatchTask::start(Deadline deadline) {
  tag_steps();
  for (const coll::OpDesc& c : calls_) comm_.note_p2p_started(c);
  std::vector<int> peers = plan_.peers();
  Status st = comm_.connect(peers, deadline);
  if (!st.is_ok()) return comm_.name_failed_peer(st.with_context(describe()));
  std::vector<transport::Connection*> conns(static_cast<std::size_t>(comm_.size()), nullptr);
  for (int p : peers) conns[static_cast<std::size_t>(p)] = comm_.connection(p);
  run_.emplace(plan_, bufs_, calls_.front(), comm_.rank(), std::move(conns), comm_.window());
  run_->set_step_tags(tags_);
  return Status::ok();
}

Result<exec::Progress> P2PBatchTask::progress() {
  auto r = run_->progress();
  if (!r.is_ok()) return comm_.name_failed_peer(r.status().with_context(describe()));
  if (*r == exec::Progress::Done)
    for (const coll::OpDesc& c : calls_) comm_.note_p2p_completed(c);
  return r;
}

bool P2PBatchTask::prepare_wait(std::vector<pollfd>& fds) {
  return run_ ? run_->prepare_wait(fds) : false;
}

std::string P2PBatchTask::describe() const {
  constexpr std::size_t kListed = 4;
  std::string calls;
  for (std::size_t i = 0; i < calls_.size() && i < kListed; ++i)
    calls += (i ? "; " : "") + coll::describe(calls_[i]);
  if (calls_.size() > kListed) calls += fmt::format("; and {} more", calls_.size() - kListed);
  return fmt::format("rank {}: a group of {} sends and receives ({})", comm_.rank(), calls_.size(),
                     calls);
}

std::string P2PBatchTask::pending() const {
  return run_ ? run_->pending() : "not started";
}

}  // namespace loom::detail
