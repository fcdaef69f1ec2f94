// CommImpl: grouped calls, as NCCL's ncclGroupStart/End. Calls made between the outermost
// group_start() and group_end() are validated at once (an error names the call) and recorded;
// group_end() runs them: the collectives first, in call order, with the allreduces of one data
// type and op (host buffers, no algorithm hint) fused into one call over a packed buffer at
// the place of the first; then the sends and receives, side by side in one operation (those on
// device buffers through one staging buffer on their stream; one after another only on the
// direct device path, or when they name different streams). Every rank derives the same
// collectives from
// the same calls, so the fused calls match; sends and receives are numbered per pair as
// without a group. Each call's Work forwards to the operation that carries it.
#include <map>
#include <utility>

#include "core/buffer_holds.hpp"
#include "core/comm_impl.hpp"
#include "core/group_tasks.hpp"
#include "log/log.hpp"

namespace loom::detail {

namespace {

// Fusion pays where a call's fixed cost dominates: small allreduces, packed into buckets of a
// bounded size (a 64 MiB pack of 1 MiB calls ran 3x slower per call than the calls alone on 4
// ranks: the copies and a working set out of cache). Ranks bucket the same calls the same way.
constexpr std::size_t kFuseMaxCallBytes = std::size_t{256} << 10;
constexpr std::size_t kFuseBucketBytes = std::size_t{4} << 20;

bool fusable(const GroupMember& m) {
  const coll::OpDesc& op = m.op;
  return op.kind == coll::CollKind::AllReduce && !m.on_stream && op.redop != RedOp::PreMulSum &&
         m.opts.algorithm == Algorithm::Auto &&
         op.count * dtype_size(op.dtype) <= kFuseMaxCallBytes;
}

std::pair<int, int> fusion_key(const coll::OpDesc& op) {
  return {static_cast<int>(op.dtype), static_cast<int>(op.redop)};
}

// Whether a group's sends and receives can run as one operation: those that run stream-ordered
// are staged together, which needs one stream and no direct path (whose calls run one by one).
bool batchable(const std::vector<GroupMember>& group, const std::vector<std::size_t>& p2p,
               bool direct_path) {
  const void* stream = nullptr;
  bool staged = false;
  for (std::size_t i : p2p) {
    if (!group[i].on_stream) continue;
    if (direct_path || (staged && group[i].opts.stream != stream)) return false;
    stream = group[i].opts.stream;
    staged = true;
  }
  return p2p.size() > 1;
}

// A Work whose call could not be started: it fails with `why`.
std::shared_ptr<OpState> failed(const Status& why) {
  auto s = std::make_shared<OpState>();
  s->done = true;
  s->status = why;
  return s;
}

}  // namespace

void CommImpl::drop_open_group() {
  if (group_depth_ == 0) return;
  if (!group_.empty()) {
    LOOM_LOG_WARN(Coll,
                  "rank {}: the communicator was destroyed inside an open group: its {} call(s) "
                  "never ran (group_end() was not called), the first {}",
                  rank_, group_.size(), coll::describe(group_.front().op));
    const Status why(
        ErrorCode::InvalidUsage,
        fmt::format("rank {}: the communicator was destroyed before group_end()", rank_));
    for (GroupMember& m : group_)
      m.proxy->forward = failed(why.with_context(m.proxy->grouped_call()));
  }
  group_.clear();
  group_depth_ = 0;
}

void CommImpl::group_start() {
  ++group_depth_;
}

Work CommImpl::record(coll::OpDesc op, const CollOptions& opts) {
  if (op.kind == coll::CollKind::P2P) {
    calls_.number_p2p(op);  // validates, and numbers in call order as without a group
  } else {
    op.seq = calls_.next_seq() + group_collectives_;  // for messages: launch() numbers it
    throw_if_error(coll::validate(op, rank_, nranks_));
    ++group_collectives_;
  }
  GroupMember m;
  m.on_stream = value_or_throw(device::needs_stream_path(
      stream_path_ ? &stream_path_->device() : nullptr, op, rank_, nranks_, opts.stream));
  m.op = std::move(op);
  m.opts = opts;
  m.proxy = std::make_shared<OpState>();
  m.proxy->grouped = true;
  m.proxy->grouped_call = [rank = rank_, op = m.op] {
    return fmt::format("rank {}: {}", rank, coll::describe(op));
  };
  group_.push_back(std::move(m));
  return Work(group_.back().proxy);
}

void CommImpl::group_end() {
  if (group_depth_ == 0)
    throw Error(ErrorCode::InvalidUsage,
                fmt::format("rank {}: group_end() without group_start()", rank_));
  if (--group_depth_ > 0) return;
  std::vector<GroupMember> group = std::move(group_);
  group_.clear();
  group_collectives_ = 0;
  try {
    // Buckets of fusable calls per (type, op), in call order, each up to kFuseBucketBytes.
    std::map<std::pair<int, int>, std::vector<std::vector<std::size_t>>> by_key;
    std::map<std::pair<int, int>, std::size_t> filled;
    for (std::size_t i = 0; i < group.size(); ++i) {
      if (!fusable(group[i])) continue;
      const auto key = fusion_key(group[i].op);
      const std::size_t bytes = group[i].op.count * dtype_size(group[i].op.dtype);
      auto& buckets = by_key[key];
      if (buckets.empty() || filled[key] + bytes > kFuseBucketBytes) {
        buckets.emplace_back();
        filled[key] = 0;
      }
      buckets.back().push_back(i);
      filled[key] += bytes;
    }
    std::vector<const std::vector<std::size_t>*> bucket_of(group.size(), nullptr);
    for (const auto& [key, buckets] : by_key)
      for (const auto& b : buckets)
        for (std::size_t i : b) bucket_of[i] = &b;
    std::vector<std::size_t> p2p;
    for (std::size_t i = 0; i < group.size(); ++i) {
      GroupMember& m = group[i];
      if (m.op.kind == coll::CollKind::P2P) {
        p2p.push_back(i);
      } else if (m.proxy->forward) {  // launched with an earlier fused member
      } else if (bucket_of[i] != nullptr && bucket_of[i]->size() > 1) {
        launch_fused(group, *bucket_of[i]);
      } else {
        m.proxy->forward = launch(m.op, m.opts);
      }
    }
    if (batchable(group, p2p, direct_ != nullptr)) {
      launch_p2p_batch(group, p2p);
    } else {
      for (std::size_t i : p2p)
        group[i].proxy->forward = launch(group[i].op, group[i].opts, nullptr, true);
    }
  } catch (const Error& e) {
    // The calls not started fail with the cause (a Work never left waiting for a group).
    for (GroupMember& m : group)
      if (!m.proxy->forward) m.proxy->forward = failed(Status(e.code(), e.what()));
    throw;
  }
}

void CommImpl::launch_fused(std::vector<GroupMember>& group,
                            const std::vector<std::size_t>& members) {
  const GroupMember& first = group[members.front()];
  const std::size_t es = dtype_size(first.op.dtype);
  std::vector<FusedPiece> pieces;
  std::vector<std::size_t> counts;
  std::size_t total = 0;
  for (std::size_t i : members) {
    const coll::OpDesc& op = group[i].op;
    pieces.push_back({op.send, op.recv, total * es, op.count * es});
    counts.push_back(op.count);
    total += op.count;
  }
  // The call names a stand-in buffer, the same for send and receive (in place), never read or
  // written: the arena's pieces read and write the calls' own buffers; other routes pack them
  // into a buffer made when the fused call starts (FusedAllreduceTask).
  static std::uint8_t stand_in;
  coll::OpDesc op = first.op;
  op.send = &stand_in;
  op.recv = &stand_in;
  op.count = total;
  op.fused = coll::fused_split(counts);
  std::shared_ptr<OpState> state = launch(op, first.opts, &pieces);
  for (std::size_t i : members) group[i].proxy->forward = state;
}

void CommImpl::launch_p2p_batch(std::vector<GroupMember>& group,
                                const std::vector<std::size_t>& members) {
  // Each call takes up to two extra buffers of the plan.
  constexpr std::size_t kPerBatch = exec::kMaxExtraBufs / 2;
  for (std::size_t at = 0; at < members.size(); at += kPerBatch) {
    std::vector<coll::OpDesc> calls, staged;
    std::vector<std::size_t> staged_at;  // where in `calls` each of `staged` is
    void* stream = nullptr;
    auto timeout = settings_.timeout;
    const std::size_t end = std::min(members.size(), at + kPerBatch);
    for (std::size_t k = at; k < end; ++k) {
      const GroupMember& m = group[members[k]];
      coll::OpDesc op = m.op;
      op.p2p.epoch = calls_.next_seq();  // after the group's collectives
      op.p2p.record = calls_.p2p_submitted(op, Clock::now());
      if (m.on_stream) {
        staged_at.push_back(calls.size());
        staged.push_back(op);
        stream = m.opts.stream;
      }
      calls.push_back(op);
      if (m.opts.timeout) timeout = std::min(timeout, *m.opts.timeout);
    }
    LOOM_LOG_DEBUG(Coll, "rank {}: a group of {} sends and receives ({} staged)", rank_,
                   calls.size(), staged.size());
    const Deadline deadline = Deadline::after(timeout);
    std::shared_ptr<OpState> state;
    if (staged.empty()) {
      auto task = std::make_unique<P2PBatchTask>(*this, calls, deadline);
      for (const coll::OpDesc& c : calls) hold_buffers(*task, c, nranks_);
      state = engine_->submit(std::move(task));
    } else {
      device::StagedGroup sg =
          value_or_throw(stream_path_->stage_group(staged, rank_, nranks_, stream, deadline));
      for (std::size_t j = 0; j < staged.size(); ++j) calls[staged_at[j]] = sg.host_ops[j];
      state = engine_->submit(stream_path_->wrap(
          std::make_unique<P2PBatchTask>(*this, std::move(calls), deadline), sg.shared));
      throw_if_error(stream_path_->finish_group(sg, rank_, stream));
    }
    for (std::size_t k = at; k < end; ++k) group[members[k]].proxy->forward = state;
  }
}

}  // namespace loom::detail
