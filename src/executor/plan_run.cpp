#include "executor/plan_run.hpp"

#include <algorithm>
#include <cstring>

#include "kernels/host/reduce.hpp"

namespace loom::exec {

using algo::StepKind;

PlanRun::PlanRun(const algo::Plan& plan, PlanBuffers bufs, const core::OpDesc& op, int rank,
                 std::vector<transport::Connection*> conns, std::size_t window, LocalOps* local)
    : plan_(plan),
      bufs_(bufs),
      op_(op),
      rank_(rank),
      conns_(std::move(conns)),
      window_(std::max<std::size_t>(1, window)),
      local_(local) {
  const std::size_t n = plan.steps.size();
  remaining_.resize(n);
  dep_offsets_.assign(n + 1, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const auto& st = plan.steps[i];
    remaining_[i] = st.dep_count;
    for (std::uint32_t d = 0; d < st.dep_count; ++d)
      ++dep_offsets_[plan.deps[st.dep_begin + d] + 1];
  }
  for (std::size_t i = 0; i < n; ++i) dep_offsets_[i + 1] += dep_offsets_[i];
  dependents_.resize(plan.deps.size());
  std::vector<std::uint32_t> fill(dep_offsets_.begin(), dep_offsets_.end() - 1);
  for (std::size_t i = 0; i < n; ++i) {
    const auto& st = plan.steps[i];
    for (std::uint32_t d = 0; d < st.dep_count; ++d)
      dependents_[fill[plan.deps[st.dep_begin + d]]++] = static_cast<std::uint32_t>(i);
  }
  for (std::size_t i = 0; i < n; ++i) {
    const auto& st = plan.steps[i];
    if (st.kind == StepKind::Send || st.kind == StepKind::Recv) {
      bool is_send = st.kind == StepKind::Send;
      auto it = std::find_if(lanes_.begin(), lanes_.end(), [&](const Lane& l) {
        return l.peer == st.peer && l.is_send == is_send;
      });
      if (it == lanes_.end()) {
        it = lanes_.insert(lanes_.end(), Lane{st.peer, is_send, {}, 0, {}});
        it->inflight.reserve(window_);
      }
      it->steps.push_back(static_cast<std::uint32_t>(i));
    } else if (remaining_[i] == 0) {
      local_ready_.push_back(static_cast<std::uint32_t>(i));
    }
  }
  find_fusable_reduces();
}

// A Recv into a buffer whose only reader is the next Reduce (as its second operand) can be done
// by a transport that reduces straight out of its own memory, saving a copy.
void PlanRun::find_fusable_reduces() {
  const std::size_t n = plan_.steps.size();
  fusable_.assign(n, algo::kNoStep);
  fused_.assign(n, false);
  for (std::size_t i = 0; i < n; ++i) {
    const algo::Step& st = plan_.steps[i];
    if (st.kind != StepKind::Recv || dep_offsets_[i + 1] - dep_offsets_[i] != 1) continue;
    if (!conns_[static_cast<std::size_t>(st.peer)]->supports_recv_reduce()) continue;
    std::uint32_t d = dependents_[dep_offsets_[i]];
    const algo::Step& red = plan_.steps[d];
    if (red.kind == StepKind::Reduce && red.src2.buf == st.dst.buf &&
        red.src2.offset == st.dst.offset && red.src2.bytes == st.dst.bytes &&
        red.dst.bytes == st.dst.bytes)
      fusable_[i] = d;
  }
}

Result<Progress> PlanRun::progress() {
  bool advanced = false;
  for (bool changed = true; changed;) {
    changed = false;
    for (Lane& lane : lanes_) {
      LOOM_ASSIGN_OR_RETURN(bool posted, post_ready(lane));
      LOOM_ASSIGN_OR_RETURN(bool completed, test_inflight(lane));
      changed = changed || posted || completed;
    }
    while (!local_ready_.empty()) {
      std::uint32_t s = local_ready_.back();
      local_ready_.pop_back();
      LOOM_RETURN_IF_ERROR(run_local(s));
      complete(s);
      changed = true;
    }
    advanced = advanced || changed;
  }
  if (done_ == plan_.steps.size()) return Progress::Done;
  return advanced ? Progress::Advanced : Progress::Idle;
}

Result<bool> PlanRun::post_ready(Lane& lane) {
  bool posted = false;
  while (lane.next < lane.steps.size() && lane.inflight.size() < window_) {
    std::uint32_t s = lane.steps[lane.next];
    if (remaining_[s] != 0) break;
    auto inflight = post(lane, s);
    if (!inflight.is_ok()) return inflight.status().with_peer(lane.peer);
    lane.inflight.push_back(*inflight);
    ++lane.next;
    posted = true;
  }
  return posted;
}

Result<PlanRun::Inflight> PlanRun::post(const Lane& lane, std::uint32_t s) {
  const algo::Step& st = plan_.steps[s];
  transport::Connection* c = conns_[static_cast<std::size_t>(st.peer)];
  auto tag = core::make_tag(op_, static_cast<std::uint32_t>(lane.next));
  if (lane.is_send) {
    LOOM_ASSIGN_OR_RETURN(auto req, c->isend(region(st.src), 0, st.src.bytes, tag));
    return Inflight{s, req, algo::kNoStep};
  }
  std::uint32_t r = fusable_[s];
  if (r != algo::kNoStep && remaining_[r] == 1) {  // the Reduce waits for this Recv only
    const algo::Step& red = plan_.steps[r];
    transport::ReduceInto into{op_.dtype, op_.redop, address(red.src), address(red.dst)};
    LOOM_ASSIGN_OR_RETURN(auto req, c->irecv_reduce(into, st.dst.bytes, tag));
    fused_[r] = true;
    return Inflight{s, req, r};
  }
  LOOM_ASSIGN_OR_RETURN(auto req, c->irecv(region(st.dst), 0, st.dst.bytes, tag));
  return Inflight{s, req, algo::kNoStep};
}

Result<bool> PlanRun::test_inflight(Lane& lane) {
  bool completed = false;
  for (auto it = lane.inflight.begin(); it != lane.inflight.end();) {
    transport::Connection* c = conns_[static_cast<std::size_t>(lane.peer)];
    auto tested = c->test(it->request);
    if (!tested.is_ok()) return tested.status().with_peer(lane.peer);
    if (!*tested) {
      ++it;
      continue;
    }
    complete(it->step);
    if (it->fused_reduce != algo::kNoStep) complete(it->fused_reduce);
    it = lane.inflight.erase(it);
    completed = true;
  }
  return completed;
}

Status PlanRun::run_local(std::uint32_t step) {
  const algo::Step& st = plan_.steps[step];
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

void PlanRun::complete(std::uint32_t step) {
  ++done_;
  for (std::uint32_t i = dep_offsets_[step]; i < dep_offsets_[step + 1]; ++i) {
    std::uint32_t d = dependents_[i];
    if (--remaining_[d] == 0) {
      StepKind k = plan_.steps[d].kind;
      if ((k == StepKind::Reduce || k == StepKind::Copy) && !fused_[d]) local_ready_.push_back(d);
    }
  }
}

std::uint8_t* PlanRun::address(const algo::Span& s) const {
  std::uint8_t* base = s.buf == algo::BufId::Send   ? bufs_.send
                       : s.buf == algo::BufId::Recv ? bufs_.recv
                                                    : bufs_.scratch;
  return base == nullptr ? nullptr : base + s.offset;
}

transport::MemRegion PlanRun::region(const algo::Span& s) const {
  return {address(s), s.bytes, nullptr};
}

bool PlanRun::prepare_wait(std::vector<pollfd>& fds) {
  bool may_block = true;
  for (const Lane& lane : lanes_) {
    if (lane.inflight.empty()) continue;
    auto* c = conns_[static_cast<std::size_t>(lane.peer)];
    may_block = c->prepare_wait(fds) && may_block;
  }
  return may_block;
}

std::string PlanRun::pending() const {
  std::string out;
  for (const Lane& lane : lanes_) {
    if (lane.inflight.empty() && lane.next == lane.steps.size()) continue;
    std::size_t first = lane.next - lane.inflight.size();  // oldest unfinished message
    if (!out.empty()) out += "; ";
    out += fmt::format("rank {} waits to {} message {} of {} {} rank {}", rank_,
                       lane.is_send ? "send" : "receive", first, lane.steps.size(),
                       lane.is_send ? "to" : "from", lane.peer);
  }
  return out.empty() ? "nothing pending" : out;
}

}  // namespace loom::exec
