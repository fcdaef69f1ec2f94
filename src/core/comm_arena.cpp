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

}  // namespace loom::detail
