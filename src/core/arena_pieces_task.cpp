#include "core/arena_pieces_task.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

#include "collective/tag.hpp"
#include "core/arena_task.hpp"
#include "kernels/host/reduce.hpp"

namespace loom::detail {

using coll::CollKind;

const char* ArenaPiecesTask::algorithm(CollKind kind) {
  return kind == CollKind::AllReduce ? kTwoShot : kPieces;
}

int ArenaPiecesTask::min_ranks(CollKind kind) {
  switch (kind) {
    case CollKind::AllReduce:  // 5 + 1/n bytes through memory per byte against 9 (n - 1) / n
    case CollKind::AllGather: return 3;      // 2 against 4 (n - 1) / n
    case CollKind::ReduceScatter: return 4;  // 3 + 1/n against 5 (n - 1) / n: equal at 3
    default: return std::numeric_limits<int>::max();
  }
}

std::size_t ArenaPiecesTask::piece_elems(const coll::OpDesc& op, int nranks,
                                         std::size_t piece_bytes) {
  const std::size_t esize = dtype_size(op.dtype);
  if (esize == 0 || nranks < min_ranks(op.kind)) return 0;
  if (op.kind == CollKind::ReduceScatter)
    return piece_bytes / (static_cast<std::size_t>(nranks) * esize);
  return piece_bytes / esize;
}

std::uint64_t ArenaPiecesTask::steps(const coll::OpDesc& op, std::size_t piece_elems) {
  const std::uint64_t pieces = (op.count + piece_elems - 1) / piece_elems;
  return op.kind == CollKind::AllReduce ? 2 * pieces : pieces;
}

ArenaPiecesTask::Block ArenaPiecesTask::block_of(std::size_t elems, int rank, int nranks) {
  const auto n = static_cast<std::size_t>(nranks);
  const auto r = static_cast<std::size_t>(rank);
  const std::size_t first = elems * r / n;
  return {first, elems * (r + 1) / n - first};
}

ArenaPiecesTask::ArenaPiecesTask(TaskHost& comm, transport::Arena& arena, coll::OpDesc op,
                                 std::size_t piece_elems, Deadline deadline,
                                 std::chrono::microseconds yield,
                                 const std::vector<FusedPiece>* fused)
    : comm_(comm),
      arena_(arena),
      op_(std::move(op)),
      esize_(dtype_size(op_.dtype)),
      piece_elems_(piece_elems),
      steps_(steps(op_, piece_elems_)),
      deadline_(deadline),
      yield_(yield),
      slots_(static_cast<std::size_t>(comm.size()), nullptr),
      parts_(slots_.size(), nullptr) {
  if (fused == nullptr) {
    segments_.push_back({0, op_.count, static_cast<const std::uint8_t*>(op_.send),
                         static_cast<std::uint8_t*>(op_.recv)});
    return;
  }
  for (const FusedPiece& f : *fused)
    if (f.bytes > 0)
      segments_.push_back({f.offset / esize_, f.bytes / esize_,
                           static_cast<const std::uint8_t*>(f.send),
                           static_cast<std::uint8_t*>(f.recv)});
}

template <typename F>
void ArenaPiecesTask::each_part(std::size_t first, std::size_t elems, F&& f) const {
  const std::size_t end = first + elems;
  auto s = std::upper_bound(segments_.begin(), segments_.end(), first,
                            [](std::size_t e, const Segment& seg) { return e < seg.first; });
  if (s != segments_.begin()) --s;
  for (; s != segments_.end() && s->first < end; ++s) {
    const std::size_t from = std::max(first, s->first);
    const std::size_t to = std::min(end, s->first + s->elems);
    if (from >= to) continue;
    const std::size_t skip = (from - s->first) * esize_;
    f(s->send + skip, s->recv + skip, from - first, to - from);
  }
}

Status ArenaPiecesTask::start(Deadline /*deadline*/) {
  comm_.note_started(op_.seq);
  return Status::ok();
}

ArenaPiecesTask::Step ArenaPiecesTask::step() const {
  switch (op_.kind) {
    case CollKind::AllReduce: return step_ % 2 == 0 ? Step::Reduce : Step::Gather;
    case CollKind::AllGather: return Step::Copy;
    default: return Step::Fold;
  }
}

ArenaPiecesTask::Block ArenaPiecesTask::piece() const {
  const std::uint64_t index = op_.kind == CollKind::AllReduce ? step_ / 2 : step_;
  const std::size_t first = static_cast<std::size_t>(index) * piece_elems_;
  return {first, std::min(piece_elems_, op_.count - first)};
}

std::size_t ArenaPiecesTask::slot_bytes(int rank) const {
  const std::size_t elems = piece().elems;
  switch (step()) {
    case Step::Gather: return block_of(elems, rank, comm_.size()).elems * esize_;
    case Step::Fold: return static_cast<std::size_t>(comm_.size()) * elems * esize_;
    default: return elems * esize_;
  }
}

const std::uint8_t* ArenaPiecesTask::send_at(std::size_t element) const {
  return static_cast<const std::uint8_t*>(op_.send) + element * esize_;
}

std::uint8_t* ArenaPiecesTask::recv_at(std::size_t element) const {
  return static_cast<std::uint8_t*>(op_.recv) + element * esize_;
}

void ArenaPiecesTask::fill(std::uint8_t* slot) const {
  const Block p = piece();
  auto put = [&](std::uint8_t* dst, const std::uint8_t* src, std::size_t elems) {
    if (op_.premultiplies())
      kernels::scale(op_.dtype, dst, src, elems, op_.scalar);
    else
      std::memcpy(dst, src, elems * esize_);
  };
  const bool own_in_place = !op_.premultiplies();  // the fold reads this rank's part from send
  switch (step()) {
    case Step::Reduce: {  // the piece; its own block only when it must be scaled
      const Block b = block_of(p.elems, comm_.rank(), comm_.size());
      if (!own_in_place) {  // pre-multiplied sums are not fused: one segment
        put(slot, send_at(p.first), p.elems);
        return;
      }
      const auto copy_in = [&](std::size_t from, std::size_t elems) {
        each_part(p.first + from, elems,
                  [&](const std::uint8_t* src, std::uint8_t*, std::size_t at, std::size_t n) {
                    std::memcpy(slot + (from + at) * esize_, src, n * esize_);
                  });
      };
      copy_in(0, b.first);
      const std::size_t after = b.first + b.elems;
      copy_in(after, p.elems - after);
      return;
    }
    case Step::Copy: std::memcpy(slot, send_at(p.first), p.elems * esize_); return;
    case Step::Gather: {  // this rank's reduced block, from its output
      const Block b = block_of(p.elems, comm_.rank(), comm_.size());
      each_part(p.first + b.first, b.elems,
                [&](const std::uint8_t*, const std::uint8_t* src, std::size_t at, std::size_t n) {
                  std::memcpy(slot + at * esize_, src, n * esize_);
                });
      return;
    }
    case Step::Fold:  // the piece of every rank's block, in rank order (its own if scaled)
      for (std::size_t q = 0; q < slots_.size(); ++q)
        if (!own_in_place || q != static_cast<std::size_t>(comm_.rank()))
          put(slot + q * p.elems * esize_, send_at(q * op_.count + p.first), p.elems);
      return;
  }
}

Result<bool> ArenaPiecesTask::publish_when_free() {
  const int rank = comm_.rank();
  LOOM_ASSIGN_OR_RETURN(const bool free, arena_previous_done(arena_, rank, comm_.size(), next_));
  if (!free) return false;
  std::uint8_t* mine = arena_.own_slot();
  fill(mine);
  slots_[static_cast<std::size_t>(rank)] = mine;
  arena_.publish(coll::make_tag(op_, static_cast<std::uint32_t>(step_)), slot_bytes(rank));
  published_ = true;
  next_ = 0;
  return true;
}

Result<bool> ArenaPiecesTask::gather_slots() {
  const int n = comm_.size();
  const coll::Tag expected = coll::make_tag(op_, static_cast<std::uint32_t>(step_));
  for (; next_ < n; ++next_) {
    if (next_ == comm_.rank()) continue;
    LOOM_ASSIGN_OR_RETURN(const std::uint8_t* slot, arena_peer_slot(arena_, comm_.rank(), next_,
                                                                    expected, slot_bytes(next_)));
    if (slot == nullptr) return false;
    slots_[static_cast<std::size_t>(next_)] = slot;
  }
  return true;
}

void ArenaPiecesTask::fold(std::uint8_t* dst, std::size_t offset, const std::uint8_t* own,
                           std::size_t elems) {
  if (elems == 0) return;
  for (std::size_t q = 0; q < slots_.size(); ++q)
    parts_[q] = static_cast<const std::uint8_t*>(slots_[q]) + offset;
  // This rank's part straight from its input, unless scaled into its slot. In place it is
  // `dst` itself, which reduce_n allows (it reads each tile of every source before writing it).
  if (!op_.premultiplies()) parts_[static_cast<std::size_t>(comm_.rank())] = own;
  kernels::reduce_n(op_.dtype, op_.redop, dst, parts_.data(), comm_.size(), elems);
  if (op_.divides_for_avg(comm_.rank())) kernels::finalize_avg(op_.dtype, dst, elems, comm_.size());
}

void ArenaPiecesTask::compute() {
  const int n = comm_.size();
  const int rank = comm_.rank();
  const Block p = piece();
  auto slot = [&](int q) {
    return static_cast<const std::uint8_t*>(slots_[static_cast<std::size_t>(q)]);
  };
  switch (step()) {
    case Step::Reduce: {
      const Block b = block_of(p.elems, rank, n);
      each_part(p.first + b.first, b.elems,
                [&](const std::uint8_t* own, std::uint8_t* dst, std::size_t at, std::size_t k) {
                  fold(dst, (b.first + at) * esize_, own, k);
                });
      return;
    }
    case Step::Gather:  // the others' reduced blocks to their places
      for (int q = 0; q < n; ++q) {
        const Block b = block_of(p.elems, q, n);
        if (q == rank || b.elems == 0) continue;
        each_part(p.first + b.first, b.elems,
                  [&](const std::uint8_t*, std::uint8_t* dst, std::size_t at, std::size_t k) {
                    std::memcpy(dst, slot(q) + at * esize_, k * esize_);
                  });
      }
      return;
    case Step::Copy:  // every rank's piece (this rank's too, unless in place: it is there)
      for (int q = 0; q < n; ++q) {
        std::uint8_t* to = recv_at(static_cast<std::size_t>(q) * op_.count + p.first);
        if (q != rank || to != send_at(p.first)) std::memcpy(to, slot(q), p.elems * esize_);
      }
      return;
    case Step::Fold:
      fold(recv_at(p.first), static_cast<std::size_t>(rank) * p.elems * esize_,
           send_at(static_cast<std::size_t>(rank) * op_.count + p.first), p.elems);
      return;
  }
}

Result<exec::Progress> ArenaPiecesTask::progress() {
  if (!published_) {
    auto free = publish_when_free();
    if (!free.is_ok()) return free.status().with_context(describe());
    if (!*free) return exec::Progress::Idle;
  }
  auto all = gather_slots();
  if (!all.is_ok()) return all.status().with_context(describe());
  if (!*all) return exec::Progress::Idle;
  compute();
  arena_.finish(true);  // every step reads every rank's slot
  published_ = false;
  next_ = 0;
  if (++step_ < steps_) return exec::Progress::Advanced;
  comm_.note_completed(op_.seq);
  return exec::Progress::Done;
}

bool ArenaPiecesTask::prepare_wait(std::vector<pollfd>& fds) {
  return next_ < comm_.size() && arena_.prepare_wait(next_, !published_, fds);
}

std::string ArenaPiecesTask::describe() const {
  return fmt::format("rank {}: {} [{}]", comm_.rank(), coll::describe(op_), algorithm(op_.kind));
}

std::string ArenaPiecesTask::pending() const {
  const std::uint64_t per_piece = op_.kind == CollKind::AllReduce ? 2 : 1;
  const char* what = step() == Step::Reduce   ? "reduce step"
                     : step() == Step::Gather ? "gather step"
                                              : "step";
  const std::string where =
      fmt::format("{} of piece {} of {}", what, step_ / per_piece + 1, steps_ / per_piece);
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
