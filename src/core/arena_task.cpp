#include "core/arena_task.hpp"

#include <cstring>

#include "collective/tag.hpp"
#include "core/buffer_holds.hpp"
#include "kernels/host/reduce.hpp"

namespace loom::detail {

using coll::CollKind;

bool arena_serves(CollKind kind) {
  switch (kind) {
    case CollKind::AllReduce:
    case CollKind::Reduce:
    case CollKind::ReduceScatter:
    case CollKind::AllGather:
    case CollKind::Broadcast:
    case CollKind::AllToAll:
    case CollKind::Barrier: return true;
    default: return false;
  }
}

std::size_t arena_slot_bytes(const coll::OpDesc& op, int rank, int nranks) {
  if (op.kind == CollKind::Barrier) return 0;
  if (op.kind == CollKind::Broadcast) return rank == op.root ? op.send_bytes(nranks) : 0;
  return op.send_bytes(nranks);
}

Status check_previous_arena_call(const transport::Arena& arena, int rank, int nranks) {
  if (arena.previous_read_every_slot()) return Status::ok();  // compared as that call read them
  coll::Tag mine;
  std::size_t mine_len = 0;
  if (arena.previous_slot(rank, mine, mine_len) == nullptr) return Status::ok();  // first call
  for (int r = 0; r < nranks; ++r) {
    coll::Tag theirs;
    std::size_t len = 0;
    if (r == rank || arena.previous_slot(r, theirs, len) == nullptr) continue;
    if (!(theirs == mine))  // lengths differ by rank (a broadcast's root writes, others not)
      return coll::mismatched_message(rank, r, mine, mine_len, theirs, len);
  }
  return Status::ok();
}

Result<bool> arena_previous_done(const transport::Arena& arena, int rank, int nranks, int& next) {
  if (arena.previous_read_every_slot()) return true;  // every rank had published it, alike
  coll::Tag tag;
  std::size_t len = 0;
  if (arena.previous_slot(rank, tag, len) == nullptr) return true;  // the first call
  for (; next < nranks; ++next)
    if (next != rank && arena.previous_slot(next, tag, len) == nullptr) return false;
  LOOM_RETURN_IF_ERROR(check_previous_arena_call(arena, rank, nranks));
  return true;
}

Result<const std::uint8_t*> arena_peer_slot(const transport::Arena& arena, int rank, int peer,
                                            const coll::Tag& expected, std::size_t want) {
  coll::Tag tag;
  std::size_t len = 0;
  const std::uint8_t* slot = arena.peer_slot(peer, tag, len);
  if (slot != nullptr && (!(tag == expected) || len != want))
    return coll::mismatched_message(rank, peer, expected, want, tag, len);
  return slot;
}

ArenaTask::ArenaTask(TaskHost& comm, transport::Arena& arena, coll::OpDesc op, Deadline deadline,
                     std::chrono::microseconds yield)
    : comm_(comm),
      arena_(arena),
      op_(std::move(op)),
      deadline_(deadline),
      yield_(yield),
      slots_(static_cast<std::size_t>(comm.size()), nullptr) {
  set_call();
}

void ArenaTask::reuse(const coll::OpDesc& op, Deadline deadline, Clock::time_point submitted) {
  op_ = op;
  deadline_ = deadline;
  submitted_ = submitted;
  recorded_ = false;
  started_ = false;
  published_ = false;
  next_ = 0;
  set_call();
}

void ArenaTask::set_call() {
  tag_ = coll::make_tag(op_, 0);
  bytes_ = op_.kind == CollKind::Barrier ? 0 : op_.send_bytes(comm_.size());
}

std::size_t ArenaTask::slot_bytes(int rank) const {
  return op_.kind != CollKind::Broadcast || rank == op_.root ? bytes_ : 0;
}

Status ArenaTask::start(Deadline /*deadline*/) {
  started_ = true;
  if (recorded_) comm_.note_started(op_.seq);
  return Status::ok();
}

// Still on the caller's thread, inside its call: the buffers cannot have been freed yet. A call
// that finishes there needs no hold on them (nor a record before it ends).
void ArenaTask::queued() {
  if (recorded_) return;
  recorded_ = true;
  hold_buffers(*this, op_, comm_.size());
  comm_.note_submitted(op_, kAlgorithm, submitted_);
  if (started_) comm_.note_started(op_.seq);
}

Result<bool> ArenaTask::publish_when_free() {
  const int n = comm_.size();
  LOOM_ASSIGN_OR_RETURN(const bool free, arena_previous_done(arena_, comm_.rank(), n, next_));
  if (!free) return false;
  const std::size_t bytes = slot_bytes(comm_.rank());
  std::uint8_t* mine = arena_.own_slot();
  if (op_.premultiplies())
    kernels::scale(op_.dtype, mine, op_.send, bytes / dtype_size(op_.dtype), op_.scalar);
  else if (bytes > 0)
    std::memcpy(mine, op_.send, bytes);
  slots_[static_cast<std::size_t>(comm_.rank())] = mine;
  arena_.publish(tag_, bytes);
  published_ = true;
  next_ = 0;
  return true;
}

bool ArenaTask::needs(int peer) const {
  const int rank = comm_.rank();
  if (op_.kind == CollKind::Broadcast) return rank != op_.root && peer == op_.root;
  if (op_.kind == CollKind::Reduce) return rank == op_.root;
  return true;
}

bool ArenaTask::reads_every_slot() const {
  const int rank = comm_.rank();
  if (op_.kind == CollKind::Broadcast) return rank != op_.root && comm_.size() == 2;
  if (op_.kind == CollKind::Reduce) return rank == op_.root;
  return true;
}

Result<exec::Progress> ArenaTask::progress() {
  const int n = comm_.size();
  if (!published_) {
    auto free = publish_when_free();
    if (!free.is_ok()) return free.status().with_context(describe());
    if (!*free) return exec::Progress::Idle;
  }
  for (; next_ < n; ++next_) {
    if (next_ == comm_.rank() || !needs(next_)) continue;
    auto slot = arena_peer_slot(arena_, comm_.rank(), next_, tag_, slot_bytes(next_));
    if (!slot.is_ok()) return slot.status().with_context(describe());
    if (*slot == nullptr) return exec::Progress::Idle;
    slots_[static_cast<std::size_t>(next_)] = *slot;
  }
  compute();
  arena_.finish(reads_every_slot());
  // Every rank has finished its earlier calls: a message of one of them still unread was sent
  // by a mismatched call.
  if (op_.kind == CollKind::Barrier && op_.seq > 0)
    LOOM_RETURN_IF_ERROR(comm_
                             .find_unread_messages(static_cast<std::int64_t>(op_.seq) - 1,
                                                   static_cast<std::int64_t>(op_.seq))
                             .with_context(describe()));
  if (recorded_)
    comm_.note_completed(op_.seq);
  else
    comm_.note_ran(op_, kAlgorithm, submitted_);
  return exec::Progress::Done;
}

void ArenaTask::compute() {
  const int n = comm_.size();
  const int rank = comm_.rank();
  const std::size_t bytes = op_.count * dtype_size(op_.dtype);
  auto slot = [&](std::size_t r) { return static_cast<const std::uint8_t*>(slots_[r]); };
  switch (op_.kind) {
    case CollKind::AllReduce:
    case CollKind::Reduce:
      if (!op_.uses_recv(rank)) return;
      kernels::reduce_n(op_.dtype, op_.redop, op_.recv, slots_.data(), n, op_.count);
      break;
    case CollKind::ReduceScatter:  // this rank's block of every slot
      for (std::size_t r = 0; r < slots_.size(); ++r)
        slots_[r] = slot(r) + static_cast<std::size_t>(rank) * bytes;
      kernels::reduce_n(op_.dtype, op_.redop, op_.recv, slots_.data(), n, op_.count);
      break;
    case CollKind::AllGather:
      for (std::size_t r = 0; r < slots_.size(); ++r)
        std::memmove(static_cast<std::uint8_t*>(op_.recv) + r * bytes, slot(r), bytes);
      return;
    case CollKind::AllToAll:  // block `rank` of every slot, in rank order
      for (std::size_t r = 0; r < slots_.size(); ++r)
        std::memmove(static_cast<std::uint8_t*>(op_.recv) + r * bytes,
                     slot(r) + static_cast<std::size_t>(rank) * bytes, bytes);
      return;
    case CollKind::Broadcast: {
      const std::size_t root = static_cast<std::size_t>(op_.root);
      if (bytes > 0) std::memcpy(op_.recv, slot(root), bytes);
      return;
    }
    default:  // barrier
      return;
  }
  if (op_.divides_for_avg(rank)) kernels::finalize_avg(op_.dtype, op_.recv, op_.count, n);
}

bool ArenaTask::prepare_wait(std::vector<pollfd>& fds) {
  return next_ < comm_.size() && arena_.prepare_wait(next_, !published_, fds);
}

std::string ArenaTask::describe() const {
  return fmt::format("rank {}: {} [{}]", comm_.rank(), coll::describe(op_), kAlgorithm);
}

std::string ArenaTask::pending() const {
  if (next_ >= comm_.size()) return "nothing (computing its result)";
  if (!published_)
    return fmt::format(
        "rank {} waits for rank {} to finish its previous call in the shared-memory arena (its "
        "slot is needed again)",
        comm_.rank(), next_);
  return fmt::format(
      "rank {} waits for the input from rank {} in the shared-memory arena (ranks below {} have "
      "written theirs)",
      comm_.rank(), next_, next_);
}

}  // namespace loom::detail
