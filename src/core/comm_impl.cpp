#include "core/comm_impl.hpp"

#include "core/any_source_task.hpp"
#include "core/arena_pieces_task.hpp"
#include "core/arena_task.hpp"
#include "core/buffer_holds.hpp"
#include "core/collective_task.hpp"
#include "core/group_tasks.hpp"
#include "log/log.hpp"
#include "selector/plan_policy.hpp"
#include "transports/registry.hpp"

namespace loom::detail {

Result<CommSettings> CommSettings::from(const config::Config& cfg) {
  CommSettings s;
  s.timeout = cfg.get_duration("LOOM_TIMEOUT");
  s.check_calls_after = cfg.get_duration("LOOM_MISMATCH_CHECK_AFTER");
  LOOM_ASSIGN_OR_RETURN(s.plan.chunk_bytes, select::chunk_from(cfg));
  s.plan.depth = static_cast<std::size_t>(cfg.get_int("LOOM_PIPELINE_DEPTH"));
  s.spin = std::chrono::microseconds(cfg.get_int("LOOM_SPIN_US"));    // < 0: chosen at init
  s.yield = std::chrono::microseconds(cfg.get_int("LOOM_YIELD_US"));  // < 0: chosen at init
  LOOM_RETURN_IF_ERROR(transport::builtin_transports().check_settings(cfg));
  s.algo = cfg.get_string("LOOM_ALGO");
  s.device = cfg.get_string("LOOM_DEVICE");
  s.wait_value_gates = cfg.get_string("LOOM_STREAM_GATE") == "wait-value";
  s.oneshot = cfg.get_string("LOOM_SHM_ONESHOT_MAX");
  LOOM_RETURN_IF_ERROR(select::oneshot_max_from(s.oneshot, 1).status());
  s.arena_piece = cfg.get_string("LOOM_SHM_ARENA_PIECE");
  LOOM_RETURN_IF_ERROR(select::arena_piece_from(s.arena_piece, 1).status());
  s.flight_calls = static_cast<std::size_t>(cfg.get_int("LOOM_FLIGHT_RECORDER"));
  s.flight_dir = cfg.get_string("LOOM_FLIGHT_DIR");
  LOOM_ASSIGN_OR_RETURN(s.ofi_hmem, parse_ofi_hmem(cfg.get_string("LOOM_OFI_HMEM")));
  if (s.timeout.count() <= 0)
    return make_error(ErrorCode::InvalidUsage, "LOOM_TIMEOUT must be positive");
  if (s.check_calls_after.count() < 0 || s.check_calls_after > std::chrono::hours(1))
    return make_error(ErrorCode::InvalidUsage, "LOOM_MISMATCH_CHECK_AFTER={} ms is outside [0, 1h]",
                      s.check_calls_after.count());
  if (s.flight_calls > 0 && s.flight_calls < 16)
    return make_error(ErrorCode::InvalidUsage,
                      "LOOM_FLIGHT_RECORDER={} is below 16 (0 keeps the calls without their times)",
                      s.flight_calls);
  if (s.plan.depth < 1 || s.plan.depth > 64)
    return make_error(ErrorCode::InvalidUsage, "LOOM_PIPELINE_DEPTH={} is outside [1, 64]",
                      s.plan.depth);
  LOOM_ASSIGN_OR_RETURN(s.plan.policy, select::Policy::parse(s.algo));
  LOOM_ASSIGN_OR_RETURN(s.plan.tuning, plan_tuning(cfg));
  s.plan.deterministic = cfg.get_bool("LOOM_DETERMINISTIC");
  return s;
}

void CommImpl::check_usable(const CollOptions& opts) const {
  if (aborted_.load())
    throw Error(ErrorCode::Aborted, fmt::format("rank {}: the communicator was aborted", rank_));
  throw_if_error(engine_->failure());
  if (Status remote = reliability_->monitor().first_failure(); !remote.is_ok())
    throw_if_error(remote);
  if (opts.timeout)
    throw_if_error(config::check_timeout("CollOptions::timeout", *opts.timeout)
                       .with_context(fmt::format("rank {}", rank_)));
}

Work CommImpl::submit(coll::OpDesc op, const CollOptions& opts) {
  check_usable(opts);
  if (op.has_redop() && op.redop == RedOp::PreMulSum) op.scalar = opts.scalar;
  if (group_depth_ > 0) return record(std::move(op), opts);
  return Work(launch(std::move(op), opts));
}

Work CommImpl::receive_any(coll::OpDesc op, int* source, const CollOptions& opts) {
  check_usable(opts);
  if (group_depth_ > 0)
    throw Error(ErrorCode::InvalidUsage,
                fmt::format("rank {}: {}: a receive from any source cannot be part of a group (its "
                            "sender is known only when it runs)",
                            rank_, coll::describe(op)));
  const bool on_stream = value_or_throw(device::needs_stream_path(
      stream_path_ ? &stream_path_->device() : nullptr, op, rank_, nranks_, opts.stream));
  if (on_stream)
    throw Error(ErrorCode::InvalidUsage,
                fmt::format("rank {}: {}: a receive from any source takes host memory, without a "
                            "stream",
                            rank_, coll::describe(op)));
  calls_.number_p2p(op);  // validates; numbered when it finds its sender
  op.p2p.epoch = calls_.next_seq();
  const Clock::time_point now = Clock::now();
  op.p2p.record = calls_.p2p_submitted(op, now);
  Deadline deadline = Deadline::after(opts.timeout.value_or(settings_.timeout), now);
  return Work(engine_->submit(holding_buffers(
      std::make_unique<AnySourceRecvTask>(*this, op, source, deadline), op, nranks_)));
}

std::shared_ptr<OpState> CommImpl::launch(coll::OpDesc op, const CollOptions& opts,
                                          const std::vector<FusedPiece>* fused, bool numbered) {
  const bool p2p = op.kind == coll::CollKind::P2P;
  if (!p2p)
    calls_.number_collective(op);
  else if (!numbered)
    calls_.number_p2p(op);
  if (p2p) op.p2p.epoch = calls_.next_seq();
  const bool on_stream = value_or_throw(device::needs_stream_path(
      stream_path_ ? &stream_path_->device() : nullptr, op, rank_, nranks_, opts.stream));
  auto nothing_to_do = [&] {
    calls_.remember(op);
    auto done = std::make_shared<OpState>();
    done->done = true;
    return done;
  };
  if (op.count == 0 && op.kind != coll::CollKind::Barrier && op.kind != coll::CollKind::AllToAllV &&
      !p2p)
    return nothing_to_do();
  // A fused group's allreduce takes the route a single call of its total would take, so that a
  // rank whose group was split differently meets the same route and is told (OpDesc::fused).
  const Clock::time_point now = Clock::now();
  const Deadline deadline = Deadline::after(opts.timeout.value_or(settings_.timeout), now);
  const auto fuse = [&](TaskMaker make, std::string algorithm) {
    return engine_->submit(
        holding_buffers(std::make_unique<FusedAllreduceTask>(*this, op, *fused, std::move(make),
                                                             std::move(algorithm), deadline),
                        op, nranks_, fused));
  };
  if (!on_stream && uses_arena(op, opts)) {
    if (!fused) return launch_arena(op, deadline, now);
    calls_.submitted(op, ArenaTask::kAlgorithm, now);
    return fuse(
        [this, deadline](const coll::OpDesc& o) -> std::unique_ptr<exec::Task> {
          return std::make_unique<ArenaTask>(*this, *arena_, o, deadline, settings_.arena_yield);
        },
        ArenaTask::kAlgorithm);
  }
  if (const std::size_t piece = on_stream ? 0 : arena_piece_elems(op, opts); piece > 0) {
    calls_.submitted(op, ArenaPiecesTask::algorithm(op.kind), now);
    // A fused group's calls are read and written in place, piece by piece: no packing.
    return engine_->submit(
        holding_buffers(std::make_unique<ArenaPiecesTask>(*this, *arena_, op, piece, deadline,
                                                          settings_.arena_yield, fused),
                        op, nranks_, fused));
  }
  std::shared_ptr<const algo::Plan> plan = planner_->plan(op, opts);
  if (plan->steps.empty()) return nothing_to_do();
  LOOM_LOG_DEBUG(Coll, "rank {}: {} as {} ({} steps)", rank_, coll::describe(op), plan->algorithm,
                 plan->steps.size());
  // Collectives are compared between ranks; sends are not.
  if (!p2p)
    calls_.submitted(op, plan->algorithm, now);
  else
    op.p2p.record = calls_.p2p_submitted(op, now);
  if (on_stream) return submit_on_stream(op, opts.stream, std::move(plan), deadline);
  if (!fused)
    return engine_->submit(holding_buffers(
        std::make_unique<CollectiveTask>(*this, op, std::move(plan), deadline), op, nranks_));
  std::string algorithm = plan->algorithm;
  return fuse(
      [this, plan = std::move(plan),
       deadline](const coll::OpDesc& o) -> std::unique_ptr<exec::Task> {
        return std::make_unique<CollectiveTask>(*this, o, plan, deadline);
      },
      std::move(algorithm));
}

std::unique_ptr<exec::PlanRun> CommImpl::reuse_run() {
  exec::PlanRun* kept = spare_run_.exchange(nullptr, std::memory_order_acquire);
  return kept != nullptr ? std::unique_ptr<exec::PlanRun>(kept) : std::make_unique<exec::PlanRun>();
}

void CommImpl::recycle_run(std::unique_ptr<exec::PlanRun> run) {
  exec::PlanRun* none = nullptr;
  if (spare_run_.compare_exchange_strong(none, run.get(), std::memory_order_release,
                                         std::memory_order_relaxed))
    (void)run.release();  // kept; otherwise freed here
}

std::shared_ptr<OpState> CommImpl::submit_on_stream(const coll::OpDesc& op, void* stream,
                                                    std::shared_ptr<const algo::Plan> plan,
                                                    Deadline deadline) {
  if (direct_ && direct_->reads_in_place(op)) {  // peers' buffers read in place (peer_read.hpp)
    auto task = value_or_throw(
        direct_->read_in_place(op, stream, std::move(plan), nranks_, 2 * settings_.plan.depth,
                               deadline, [this, seq = op.seq] { note_completed(seq); }));
    return engine_->submit_inline(std::move(task), Clock::duration::zero());
  }
  // The direct path has no pre-multiplying step: such calls go through host staging.
  if (direct_ && !op.premultiplies()) {  // the plan runs on the device buffers (cuda_ipc)
    throw_if_error(
        direct_
            ->reserve_scratch(plan->scratch_bytes)  // before the gate
            .with_context(fmt::format("rank {}: {}: device scratch", rank_, coll::describe(op))));
    device::StagedCall call = value_or_throw(stream_path_->direct(op, rank_, stream, deadline));
    const bool numbered = op.kind != coll::CollKind::P2P;
    auto inner = direct_->task(op, std::move(plan), nranks_, 2 * settings_.plan.depth, deadline,
                               [this, op, numbered] {
                                 if (numbered)
                                   note_completed(op.seq);
                                 else
                                   note_p2p_completed(op);
                               });
    auto state = engine_->submit(stream_path_->wrap(std::move(inner), call));
    throw_if_error(stream_path_->finish(call, rank_, stream));
    return state;
  }
  device::StagedCall call =
      value_or_throw(stream_path_->stage(op, rank_, nranks_, stream, deadline));
  auto inner = std::make_unique<CollectiveTask>(*this, call.host_op, std::move(plan), deadline);
  auto state = engine_->submit(stream_path_->wrap(std::move(inner), call));
  throw_if_error(stream_path_->finish(call, rank_, stream));
  return state;
}

}  // namespace loom::detail
