#include "algorithms/plan_index.hpp"

#include <algorithm>

namespace loom::algo {
namespace {

void index_dependents(const Plan& plan, PlanIndex& x) {
  const std::size_t n = plan.steps.size();
  x.dep_counts.resize(n);
  x.dep_offsets.assign(n + 1, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const Step& st = plan.steps[i];
    x.dep_counts[i] = st.dep_count;
    for (std::uint32_t d = 0; d < st.dep_count; ++d)
      ++x.dep_offsets[plan.deps[st.dep_begin + d] + 1];
  }
  for (std::size_t i = 0; i < n; ++i) x.dep_offsets[i + 1] += x.dep_offsets[i];
  x.dependents.resize(plan.deps.size());
  std::vector<std::uint32_t> fill(x.dep_offsets.begin(), x.dep_offsets.end() - 1);
  for (std::size_t i = 0; i < n; ++i) {
    const Step& st = plan.steps[i];
    for (std::uint32_t d = 0; d < st.dep_count; ++d)
      x.dependents[fill[plan.deps[st.dep_begin + d]]++] = static_cast<std::uint32_t>(i);
  }
}

void index_lanes(const Plan& plan, PlanIndex& x) {
  for (std::size_t i = 0; i < plan.steps.size(); ++i) {
    const Step& st = plan.steps[i];
    if (st.kind != StepKind::Send && st.kind != StepKind::Recv) {
      if (st.dep_count == 0) x.local_ready.push_back(static_cast<std::uint32_t>(i));
      continue;
    }
    const bool is_send = st.kind == StepKind::Send;
    auto it = std::find_if(x.lanes.begin(), x.lanes.end(), [&](const PlanIndex::Lane& l) {
      return l.peer == st.peer && l.is_send == is_send;
    });
    if (it == x.lanes.end())
      it = x.lanes.insert(x.lanes.end(), PlanIndex::Lane{st.peer, is_send, {}});
    it->steps.push_back(static_cast<std::uint32_t>(i));
  }
}

void index_fusable(const Plan& plan, PlanIndex& x) {
  const std::size_t n = plan.steps.size();
  x.fusable.assign(n, kNoStep);
  for (std::size_t i = 0; i < n; ++i) {
    const Step& st = plan.steps[i];
    if (st.kind != StepKind::Recv || x.dep_offsets[i + 1] - x.dep_offsets[i] != 1) continue;
    const std::uint32_t d = x.dependents[x.dep_offsets[i]];
    const Step& red = plan.steps[d];
    if (red.kind == StepKind::Reduce && red.src2.buf == st.dst.buf &&
        red.src2.offset == st.dst.offset && red.src2.bytes == st.dst.bytes &&
        red.dst.bytes == st.dst.bytes) {
      x.fusable[i] = d;
      x.any_fusable = true;
    }
  }
}

}  // namespace

PlanIndex index_plan(const Plan& plan) {
  PlanIndex x;
  index_dependents(plan, x);
  index_lanes(plan, x);
  x.peers = plan.peers();
  index_fusable(plan, x);
  return x;
}

}  // namespace loom::algo
