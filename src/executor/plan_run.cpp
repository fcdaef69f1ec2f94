#include "executor/plan_run.hpp"

#include <algorithm>
#include <cstring>

#include "kernels/host/reduce.hpp"

namespace loom::exec {

using algo::StepKind;

PlanRun::PlanRun(const algo::Plan& plan, PlanBuffers bufs, const coll::OpDesc& op, int rank,
                 std::vector<transport::Connection*> conns, std::size_t window, LocalOps* local)
    : conns_(std::move(conns)) {
  reset(plan, std::move(bufs), op, rank, window, local);
}

void PlanRun::reset(const algo::Plan& plan, PlanBuffers bufs, const coll::OpDesc& op, int rank,
                    std::size_t window, LocalOps* local) {
  plan_ = &plan;
  if (plan.index) {
    own_index_.reset();
    index_ = plan.index.get();
  } else {
    own_index_ = std::make_shared<const algo::PlanIndex>(algo::index_plan(plan));
    index_ = own_index_.get();
  }
  bufs_ = std::move(bufs);
  op_ = op;
  rank_ = rank;
  window_ = std::max<std::size_t>(1, window);
  local_ = local;
  stream_local_ = local != nullptr && local->queues_on_stream();
  // assign() and clear() keep the vectors' storage: a reused run allocates nothing.
  remaining_.assign(index_->dep_counts.begin(), index_->dep_counts.end());
  local_ready_.assign(index_->local_ready.begin(), index_->local_ready.end());
  lanes_.clear();
  for (const algo::PlanIndex::Lane& def : index_->lanes) {
    Lane& lane = lanes_.emplace_back();
    lane.def = &def;
    lane.first = (lanes_.size() - 1) * window_;
    lane.fenced =
        stream_local_ && !conns_[static_cast<std::size_t>(def.peer)]->caps().stream_ordered;
  }
  inflight_.assign(lanes_.size() * window_, Inflight{});
  settle_gen_.clear();
  if (stream_local_) settle_gen_.assign(plan.steps.size(), 0);
  fused_.clear();
  if (index_->any_fusable) fused_.assign(plan.steps.size(), false);
  done_ = 0;
  fences_recorded_ = fences_passed_ = 0;
  step_tags_.clear();
}

Result<Progress> PlanRun::progress() {
  bool advanced = false;
  for (bool changed = true; changed;) {
    LOOM_ASSIGN_OR_RETURN(changed, poll_fence());
    for (Lane& lane : lanes_) {
      LOOM_ASSIGN_OR_RETURN(bool posted, post_ready(lane));
      LOOM_ASSIGN_OR_RETURN(bool completed, test_inflight(lane));
      changed = changed || posted || completed;
    }
    while (!local_ready_.empty()) {
      std::uint32_t s = local_ready_.back();
      local_ready_.pop_back();
      LOOM_RETURN_IF_ERROR(run_local(s));
      complete(s, stream_local_);
      changed = true;
    }
    advanced = advanced || changed;
  }
  if (done_ == plan_->steps.size()) return Progress::Done;
  if (!advanced) {  // pieces moved inside a message count as progress too
    const std::uint64_t moved = pieces_moved();
    advanced = moved != moved_;
    moved_ = moved;
  }
  return advanced ? Progress::Advanced : Progress::Idle;
}

std::uint64_t PlanRun::pieces_moved() const {
  std::uint64_t n = 0;
  for (const Lane& lane : lanes_)
    if (lane.count != 0) n += conns_[static_cast<std::size_t>(lane.peer())]->moved();
  return n;
}

Result<bool> PlanRun::post_ready(Lane& lane) {
  bool posted = false;
  while (lane.next < lane.steps() && lane.count < window_) {
    std::uint32_t s = lane.def->steps[lane.next];
    if (remaining_[s] != 0) break;
    if (lane.fenced) {
      LOOM_ASSIGN_OR_RETURN(bool allowed, fence_allows(s));
      if (!allowed) break;
    }
    auto inflight = post(lane, s);
    if (!inflight.is_ok()) return inflight.status().with_peer(lane.peer());
    inflight_[lane.first + lane.count++] = *inflight;
    ++lane.next;
    posted = true;
  }
  return posted;
}

Result<bool> PlanRun::fence_allows(std::uint32_t s) {
  const algo::Step& st = plan_->steps[s];
  std::uint32_t need = 0;
  for (std::uint32_t d = 0; d < st.dep_count; ++d)
    need = std::max(need, settle_gen_[plan_->deps[st.dep_begin + d]]);
  if (need <= fences_passed_) return true;
  if (fences_recorded_ == fences_passed_) {  // none in flight: this one covers `need`
    LOOM_RETURN_IF_ERROR(local_->record_fence());
    ++fences_recorded_;
  }
  return false;
}

Result<bool> PlanRun::poll_fence() {
  if (fences_recorded_ == fences_passed_) return false;
  LOOM_ASSIGN_OR_RETURN(bool passed, local_->fence_passed());
  if (passed) fences_passed_ = fences_recorded_;
  return passed;
}

Result<PlanRun::Inflight> PlanRun::post(const Lane& lane, std::uint32_t s) {
  const algo::Step& st = plan_->steps[s];
  transport::Connection* c = conns_[static_cast<std::size_t>(st.peer)];
  auto tag = step_tags_.empty()
                 ? coll::message_tag(op_, lane.is_send(), static_cast<std::uint32_t>(lane.next))
                 : step_tags_[s];
  if (lane.is_send()) {
    auto [reg, off] = region(st.src);
    LOOM_ASSIGN_OR_RETURN(auto req, plan_->buffered_sends
                                        ? c->isend_buffered(reg, off, st.src.bytes, tag)
                                        : c->isend(reg, off, st.src.bytes, tag));
    return Inflight{s, req, algo::kNoStep};
  }
  std::uint32_t r = index_->fusable[s];
  // The Reduce waits for this Recv only, and the connection can reduce as it receives.
  if (r != algo::kNoStep && remaining_[r] == 1 && c->supports_recv_reduce()) {
    const algo::Step& red = plan_->steps[r];
    transport::ReduceInto into{op_.dtype, op_.redop, address(red.src), address(red.dst)};
    LOOM_ASSIGN_OR_RETURN(auto req, c->irecv_reduce(into, st.dst.bytes, tag));
    fused_[r] = true;
    return Inflight{s, req, r};
  }
  auto [reg, off] = region(st.dst);
  LOOM_ASSIGN_OR_RETURN(auto req, c->irecv(reg, off, st.dst.bytes, tag));
  return Inflight{s, req, algo::kNoStep};
}

Result<bool> PlanRun::test_inflight(Lane& lane) {
  bool completed = false;
  transport::Connection* c = conns_[static_cast<std::size_t>(lane.peer())];
  Inflight* slots = inflight_.data() + lane.first;
  std::size_t kept = 0;  // still in flight, moved to the front in order
  for (std::size_t i = 0; i < lane.count; ++i) {
    const Inflight it = slots[i];
    auto tested = c->test(it.request);
    if (!tested.is_ok()) {
      std::copy(slots + i, slots + lane.count, slots + kept);  // leave the lane consistent
      lane.count = kept + (lane.count - i);
      return tested.status().with_peer(lane.peer());
    }
    if (!*tested) {
      slots[kept++] = it;
      continue;
    }
    if (lane.fenced && !lane.is_send()) LOOM_RETURN_IF_ERROR(local_->remote_write_landed());
    const bool queued = stream_local_ && !lane.fenced;
    complete(it.step, queued);
    if (it.fused_reduce != algo::kNoStep) complete(it.fused_reduce, queued);
    completed = true;
  }
  lane.count = kept;
  return completed;
}

Status PlanRun::run_local(std::uint32_t step) {
  const algo::Step& st = plan_->steps[step];
  if (st.kind == StepKind::Copy) {
    if (st.dst.bytes == 0 || address(st.dst) == address(st.src)) return Status::ok();
    if (local_) return local_->copy(address(st.dst), address(st.src), st.dst.bytes);
    std::memmove(address(st.dst), address(st.src), st.dst.bytes);
    return Status::ok();
  }
  std::size_t count = st.dst.bytes / dtype_size(op_.dtype);
  if (local_)
    return count ? local_->reduce(op_.dtype, op_.redop, address(st.dst), address(st.src),
                                  address(st.src2), count)
                 : Status::ok();
  kernels::reduce(op_.dtype, op_.redop, address(st.dst), address(st.src), address(st.src2), count);
  return Status::ok();
}

void PlanRun::complete(std::uint32_t step, bool queued_only) {
  ++done_;
  // Work queued now is covered by the next fence recorded, not by one already in flight.
  if (queued_only) settle_gen_[step] = fences_recorded_ + 1;
  for (std::uint32_t i = index_->dep_offsets[step]; i < index_->dep_offsets[step + 1]; ++i) {
    std::uint32_t d = index_->dependents[i];
    if (--remaining_[d] == 0) {
      StepKind k = plan_->steps[d].kind;
      const bool fused = !fused_.empty() && fused_[d];
      if ((k == StepKind::Reduce || k == StepKind::Copy) && !fused) local_ready_.push_back(d);
    }
  }
}

std::uint8_t* PlanRun::address(const algo::Span& s) const {
  const auto id = static_cast<std::uint8_t>(s.buf);
  if (id >= kFirstExtraBuf) {
    const std::size_t i = id - kFirstExtraBuf;
    std::uint8_t* p = i < bufs_.extra.size() ? bufs_.extra[i].ptr : nullptr;
    return p == nullptr ? nullptr : p + s.offset;
  }
  std::uint8_t* base = s.buf == algo::BufId::Send   ? bufs_.send
                       : s.buf == algo::BufId::Recv ? bufs_.recv
                                                    : bufs_.scratch;
  return base == nullptr ? nullptr : base + s.offset;
}

std::pair<transport::MemRegion, std::size_t> PlanRun::region(const algo::Span& s) const {
  transport::MemRegion r;
  r.space = bufs_.space;
  r.device = bufs_.device;
  switch (s.buf) {
    case algo::BufId::Send:
      r = {bufs_.send, bufs_.send_bytes, nullptr, r.space, r.device, bufs_.send_id};
      break;
    case algo::BufId::Recv:
      r = {bufs_.recv, bufs_.recv_bytes, nullptr, r.space, r.device, bufs_.recv_id};
      break;
    case algo::BufId::Scratch:
      r = {bufs_.scratch, bufs_.scratch_bytes, nullptr, r.space, r.device, bufs_.scratch_id};
      break;
    default: {  // an extra buffer
      const std::size_t i = static_cast<std::uint8_t>(s.buf) - kFirstExtraBuf;
      if (i < bufs_.extra.size())
        r = {bufs_.extra[i].ptr, bufs_.extra[i].bytes, nullptr, r.space, r.device, 0};
      break;
    }
  }
  if (r.base != nullptr && s.offset <= r.size && s.bytes <= r.size - s.offset) return {r, s.offset};
  r.base = address(s);  // size unknown: the span alone
  r.size = s.bytes;
  r.alloc_id = 0;
  return {r, 0};
}

bool PlanRun::prepare_wait(std::vector<pollfd>& fds) {
  bool may_block = true;
  // A fence in flight signals nothing: nap and look again.
  if (fences_recorded_ != fences_passed_) transport::want_timed_wakeup(fds);
  for (const Lane& lane : lanes_) {
    if (lane.count == 0) continue;
    auto* c = conns_[static_cast<std::size_t>(lane.peer())];
    may_block = c->prepare_wait(fds) && may_block;
  }
  return may_block;
}

std::string PlanRun::pending() const {
  std::string out;
  for (const Lane& lane : lanes_) {
    if (lane.count == 0 && lane.next == lane.steps()) continue;
    std::size_t first = lane.next - lane.count;  // oldest unfinished message
    if (!out.empty()) out += "; ";
    out += fmt::format("rank {} waits to {} message {} of {} {} rank {}", rank_,
                       lane.is_send() ? "send" : "receive", first, lane.steps(),
                       lane.is_send() ? "to" : "from", lane.peer());
    const std::string state = conns_[static_cast<std::size_t>(lane.peer())]->state();
    if (!state.empty()) out += " (" + state + ")";
  }
  if (fences_recorded_ != fences_passed_)
    out += fmt::format(
        "{}rank {} waits for its device stream to pass a fence before the "
        "network may touch the memory",
        out.empty() ? "" : "; ", rank_);
  return out.empty() ? "nothing pending" : out;
}

}  // namespace loom::exec
