// CommImpl: the arena that small allreduces of a one-host communicator go through
// (core/arena_task.*, transports/arena.hpp).
#include <algorithm>

#include "core/arena_pieces_task.hpp"
#include "core/arena_task.hpp"
#include "core/comm_impl.hpp"
#include "core/job_layout.hpp"
#include "log/log.hpp"
#include "selector/plan_policy.hpp"

namespace loom::detail {
// The arena exists only when every rank's peers are all served by one transport kind (every rank
// computes it alike from the cards, asking the store nothing), so a rank whose transports
// differ never waits for it.
Status CommImpl::init_arena(const JobLayout& layout, Deadline deadline) {
  LOOM_ASSIGN_OR_RETURN(settings_.oneshot_max,
                        select::oneshot_max_from(settings_.oneshot, nranks_));
  LOOM_ASSIGN_OR_RETURN(settings_.arena_piece_bytes,
                        select::arena_piece_from(settings_.arena_piece, nranks_));
  const std::size_t capacity = std::max(settings_.oneshot_max, settings_.arena_piece_bytes);
  if (nranks_ < 2 || capacity == 0 || layout.ranks_on_my_host(rank_) != nranks_) {
    settings_.arena_piece_bytes = 0;
    return Status::ok();
  }
  // Every rank knows from the cards whether all of them reach their peers through one transport
  // (no vote through the store).
  if (!layout.one_kind) {
    settings_.arena_piece_bytes = 0;
    LOOM_LOG_INFO(Coll,
                  "rank {}: no shared-memory arena: not every rank is served by one "
                  "transport",
                  rank_);
    return Status::ok();
  }
  const TransportKind kind = transports_->kind((rank_ + 1) % nranks_);
  LOOM_ASSIGN_OR_RETURN(arena_, transports_->transport(kind)->make_arena(capacity, deadline));
  if (!arena_) {
    settings_.arena_piece_bytes = 0;
    return Status::ok();
  }
  LOOM_LOG_INFO(Coll,
                "rank {}: collectives of up to {} bytes per rank go through a shared-memory "
                "arena; larger allreduces, allgathers and reduce_scatters {}",
                rank_, settings_.oneshot_max,
                settings_.arena_piece_bytes > 0 ? fmt::format("too, in pieces of {} bytes per rank",
                                                              settings_.arena_piece_bytes)
                                                : std::string("take messages"));
  return Status::ok();
}

bool CommImpl::arena_may_serve(const coll::OpDesc& op, const CollOptions& opts) const {
  return arena_ && opts.algorithm == Algorithm::Auto && !settings_.plan.policy.for_coll(op.kind);
}

bool CommImpl::uses_arena(const coll::OpDesc& op, const CollOptions& opts) const {
  return arena_may_serve(op, opts) && arena_serves(op.kind) &&
         op.send_bytes(nranks_) <= settings_.oneshot_max;
}

std::size_t CommImpl::arena_piece_elems(const coll::OpDesc& op, const CollOptions& opts) const {
  if (!arena_may_serve(op, opts) || settings_.arena_piece_bytes == 0 || op.count == 0 ||
      op.send_bytes(nranks_) <= settings_.oneshot_max)
    return 0;
  return ArenaPiecesTask::piece_elems(op, nranks_, settings_.arena_piece_bytes);
}

// Run where it was called while the engine is idle: a small call whose peers are in step ends
// within the budget, without the queue (spinning only where this rank has a CPU). The task of the
// last call that finished so is reused, and the call ledger learns of the call once, at its end.
std::shared_ptr<OpState> CommImpl::launch_arena(const coll::OpDesc& op, Deadline deadline,
                                                Clock::time_point now) {
  std::unique_ptr<ArenaTask> task(spare_arena_.exchange(nullptr, std::memory_order_acquire));
  if (!task)
    task = std::make_unique<ArenaTask>(*this, *arena_, op, deadline, settings_.arena_yield);
  task->reuse(op, deadline, now);  // (it holds the call's buffers only if it is queued)
  std::unique_ptr<exec::Task> run = std::move(task);
  auto state = engine_->submit_inline_keeping(
      run, std::min<Clock::duration>(settings_.spin, kInlineSpin), now);
  if (run) {  // finished here: kept for the next call (one kept at most)
    run->release_kept();
    ArenaTask* none = nullptr;
    if (spare_arena_.compare_exchange_strong(none, static_cast<ArenaTask*>(run.get()),
                                             std::memory_order_release, std::memory_order_relaxed))
      (void)run.release();
  }
  return state;
}

}  // namespace loom::detail
