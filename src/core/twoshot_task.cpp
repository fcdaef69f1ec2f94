#include "core/twoshot_task.hpp"

#include <algorithm>
#include <cstring>

#include "collective/tag.hpp"
#include "core/arena_task.hpp"
#include "kernels/host/reduce.hpp"

namespace loom::detail {

std::uint64_t TwoShotTask::steps(std::size_t count, std::size_t piece_elems) {
  return 2 * ((count + piece_elems - 1) / piece_elems);
}

TwoShotTask::Block TwoShotTask::block_of(std::size_t elems, int rank, int nranks) {
  const auto n = static_cast<std::size_t>(nranks);
  const auto r = static_cast<std::size_t>(rank);
  const std::size_t first = elems * r / n;
  return {first, elems * (r + 1) / n - first};
}

TwoShotTask::TwoShotTask(TaskHost& comm, transport::Arena& arena, coll::OpDesc op,
                         std::size_t piece_bytes, Deadline deadline,
                         std::chrono::microseconds yield)
    : comm_(comm),
      arena_(arena),
      op_(std::move(op)),
      esize_(dtype_size(op_.dtype)),
      piece_elems_(std::max<std::size_t>(1, piece_bytes / esize_)),
      steps_(steps(op_.count, piece_elems_)),
      deadline_(deadline),
      yield_(yield),
      slots_(static_cast<std::size_t>(comm.size()), nullptr) {}

Status TwoShotTask::start(Deadline /*deadline*/) {
  comm_.note_started(op_.seq);
  return Status::ok();
}

TwoShotTask::Block TwoShotTask::piece() const {
  const std::size_t first = static_cast<std::size_t>(step_ / 2) * piece_elems_;
  return {first, std::min(piece_elems_, op_.count - first)};
}

std::size_t TwoShotTask::slot_bytes(int rank) const {
  const std::size_t elems = piece().elems;
  return (reducing() ? elems : block_of(elems, rank, comm_.size()).elems) * esize_;
}

Result<bool> TwoShotTask::publish_when_free() {
  const int n = comm_.size();
  const int rank = comm_.rank();
  coll::Tag tag;
  std::size_t len = 0;
  if (arena_.previous_slot(rank, tag, len) != nullptr) {  // not the arena's first step
    for (; next_ < n; ++next_)
      if (next_ != rank && arena_.previous_slot(next_, tag, len) == nullptr) return false;
    LOOM_RETURN_IF_ERROR(check_previous_arena_call(arena_, rank, n));
  }
  const Block p = piece();
  std::uint8_t* mine = arena_.own_slot();
  const std::size_t bytes = slot_bytes(rank);
  if (reducing()) {
    const auto* src = static_cast<const std::uint8_t*>(op_.send) + p.first * esize_;
    if (op_.premultiplies())
      kernels::scale(op_.dtype, mine, src, p.elems, op_.scalar);
    else
      std::memcpy(mine, src, bytes);
  } else {  // this rank's reduced block, from its output
    const Block b = block_of(p.elems, rank, n);
    std::memcpy(mine, static_cast<const std::uint8_t*>(op_.recv) + (p.first + b.first) * esize_,
                bytes);
  }
  slots_[static_cast<std::size_t>(rank)] = mine;
  arena_.publish(coll::make_tag(op_, static_cast<std::uint32_t>(step_)), bytes);
  published_ = true;
  next_ = 0;
  return true;
}

Result<bool> TwoShotTask::gather_slots() {
  const int n = comm_.size();
  const coll::Tag expected = coll::make_tag(op_, static_cast<std::uint32_t>(step_));
  for (; next_ < n; ++next_) {
    if (next_ == comm_.rank()) continue;
    coll::Tag tag;
    std::size_t len = 0;
    const std::uint8_t* slot = arena_.peer_slot(next_, tag, len);
    if (slot == nullptr) return false;
    const std::size_t want = slot_bytes(next_);
    if (!(tag == expected) || len != want)
      return coll::mismatched_message(comm_.rank(), next_, expected, want, tag, len);
    slots_[static_cast<std::size_t>(next_)] = slot;
  }
  return true;
}

void TwoShotTask::compute() {
  const int n = comm_.size();
  const int rank = comm_.rank();
  const Block p = piece();
  auto* out = static_cast<std::uint8_t*>(op_.recv) + p.first * esize_;
  if (!reducing()) {  // the others' reduced blocks to their places
    for (int q = 0; q < n; ++q) {
      const Block b = block_of(p.elems, q, n);
      if (q != rank && b.elems > 0)
        std::memcpy(out + b.first * esize_, slots_[static_cast<std::size_t>(q)], b.elems * esize_);
    }
    return;
  }
  const Block b = block_of(p.elems, rank, n);
  if (b.elems == 0) return;
  for (auto& s : slots_) s = static_cast<const std::uint8_t*>(s) + b.first * esize_;
  kernels::reduce_n(op_.dtype, op_.redop, out + b.first * esize_, slots_.data(), n, b.elems);
  if (op_.divides_for_avg(rank))
    kernels::finalize_avg(op_.dtype, out + b.first * esize_, b.elems, n);
}

Result<exec::Progress> TwoShotTask::progress() {
  if (!published_) {
    auto free = publish_when_free();
    if (!free.is_ok()) return free.status().with_context(describe());
    if (!*free) return exec::Progress::Idle;
  }
  auto all = gather_slots();
  if (!all.is_ok()) return all.status().with_context(describe());
  if (!*all) return exec::Progress::Idle;
  compute();
  arena_.finish();
  published_ = false;
  next_ = 0;
  if (++step_ < steps_) return exec::Progress::Advanced;
  comm_.note_completed(op_.seq);
  return exec::Progress::Done;
}

bool TwoShotTask::prepare_wait(std::vector<pollfd>& fds) {
  return next_ < comm_.size() && arena_.prepare_wait(next_, !published_, fds);
}

std::string TwoShotTask::describe() const {
  return fmt::format("rank {}: {} [{}]", comm_.rank(), coll::describe(op_), kAlgorithm);
}

std::string TwoShotTask::pending() const {
  const std::string where = fmt::format(
      "{} step of piece {} of {}", reducing() ? "reduce" : "gather", step_ / 2 + 1, steps_ / 2);
  if (next_ >= comm_.size()) return fmt::format("nothing ({}: computing)", where);
  if (!published_)
    return fmt::format(
        "rank {} waits for rank {} to finish the step before the {} in the shared-memory arena "
        "(its slot is needed again)",
        comm_.rank(), next_, where);
  return fmt::format(
      "rank {} waits for rank {}'s {} in the shared-memory arena (ranks below {} have written "
      "theirs)",
      comm_.rank(), next_, where, next_);
}

}  // namespace loom::detail
