#include "tools/loom_sim/replay.hpp"

#include <algorithm>
#include <deque>
#include <queue>
#include <unordered_map>
#include <vector>

#include "algorithms/factory.hpp"
#include "selector/model.hpp"
#include "selector/plan_policy.hpp"
#include "selector/shared_cpu.hpp"

namespace loom::sim {
namespace {

// The plan the communicator would run (the one factory), for fp32 data of `bytes` in total.
algo::Plan build(Coll coll, Algo a, int rank, std::size_t bytes, const Shape& s,
                 const std::vector<std::vector<int>>& hosts, const Pipeline& p) {
  const std::size_t n = static_cast<std::size_t>(s.nranks);
  const bool per_rank = coll == Coll::AllGather || coll == Coll::ReduceScatter;
  algo::PlanRequest r;
  r.op.kind = coll;
  r.op.dtype = DataType::Float32;
  r.op.count = per_rank ? bytes / 4 / n : bytes / 4;
  r.op.root = 0;
  r.algo = a;
  r.rank = rank;
  r.nranks = s.nranks;
  r.hosts = hosts;
  r.chunk_bytes = p.chunk_bytes;
  r.depth = p.depth;
  r.min_step_part_bytes = select::ring_min_step_part_bytes(s);  // as CommImpl
  return algo::make_plan(r);
}

struct Lane {
  std::vector<std::uint32_t> steps;
  std::size_t next = 0;
};

struct RankState {
  algo::Plan plan;
  std::vector<std::uint32_t> remaining;
  std::vector<std::uint32_t> dep_offsets, dependents;
  std::vector<double> ready;           // -1: not ready yet
  std::vector<std::uint32_t> lane_of;  // per Send/Recv step
  std::vector<Lane> lanes;
  std::unordered_map<std::uint64_t, std::uint32_t> lane_index;  // peer * 2 + is_send
  double cpu_free = 0, port_free = 0;
};

class Replay {
 public:
  Replay(const Shape& s, const Tuning& t, double bytes) : s_(s), t_(t), bytes_(bytes) {
    extra_alpha_ = select::shared_cpu::wakeup_us(s, t);
    share_ = select::cpu_load(s);
    single_copy_min_ = select::single_copy_min(s, t);
    nic_free_.assign(static_cast<std::size_t>(s.nhosts), 0);
  }

  void add_rank(algo::Plan plan) {
    RankState st;
    st.plan = std::move(plan);
    const std::size_t n = st.plan.steps.size();
    st.remaining.resize(n);
    st.dep_offsets.assign(n + 1, 0);
    for (std::size_t i = 0; i < n; ++i) {
      const auto& step = st.plan.steps[i];
      st.remaining[i] = step.dep_count;
      for (std::uint32_t d = 0; d < step.dep_count; ++d)
        ++st.dep_offsets[st.plan.deps[step.dep_begin + d] + 1];
    }
    for (std::size_t i = 0; i < n; ++i) st.dep_offsets[i + 1] += st.dep_offsets[i];
    st.dependents.resize(st.plan.deps.size());
    std::vector<std::uint32_t> fill(st.dep_offsets.begin(), st.dep_offsets.end() - 1);
    st.lane_of.assign(n, 0);
    for (std::size_t i = 0; i < n; ++i) {
      const auto& step = st.plan.steps[i];
      for (std::uint32_t d = 0; d < step.dep_count; ++d)
        st.dependents[fill[st.plan.deps[step.dep_begin + d]]++] = static_cast<std::uint32_t>(i);
      if (step.kind == algo::StepKind::Send || step.kind == algo::StepKind::Recv) {
        std::uint64_t key =
            static_cast<std::uint64_t>(step.peer) * 2 + (step.kind == algo::StepKind::Send ? 1 : 0);
        auto [it, fresh] =
            st.lane_index.try_emplace(key, static_cast<std::uint32_t>(st.lanes.size()));
        if (fresh) st.lanes.emplace_back();
        st.lanes[it->second].steps.push_back(static_cast<std::uint32_t>(i));
        st.lane_of[i] = it->second;
      }
    }
    st.ready.assign(n, -1);
    ranks_.push_back(std::move(st));
  }

  Result<double> run() {
    for (std::size_t r = 0; r < ranks_.size(); ++r)
      for (std::uint32_t i = 0; i < ranks_[r].plan.steps.size(); ++i)
        if (ranks_[r].remaining[i] == 0) on_ready(static_cast<int>(r), i, 0);
    double end = 0;
    std::size_t completed = 0;
    while (!events_.empty()) {
      auto [time, rank, step] = events_.top();
      events_.pop();
      end = std::max(end, time);
      ++completed;
      RankState& st = ranks_[static_cast<std::size_t>(rank)];
      for (std::uint32_t i = st.dep_offsets[step]; i < st.dep_offsets[step + 1]; ++i) {
        std::uint32_t d = st.dependents[i];
        if (--st.remaining[d] == 0) on_ready(rank, d, time);
      }
    }
    std::size_t total = 0;
    for (const auto& st : ranks_) total += st.plan.steps.size();
    if (completed != total)
      return make_error(ErrorCode::Internal, "replay: {} of {} steps completed (deadlock)",
                        completed, total);
    return end;
  }

 private:
  using Event = std::tuple<double, int, std::uint32_t>;

  [[nodiscard]] int host(int r) const { return r / std::max(1, s_.per_host); }
  [[nodiscard]] double us(double bytes, double gbps) const {
    return gbps > 0 ? bytes * 1e-3 / gbps : 0;
  }

  void on_ready(int r, std::uint32_t s, double t) {
    RankState& st = ranks_[static_cast<std::size_t>(r)];
    st.ready[s] = t;
    const auto& step = st.plan.steps[s];
    if (step.kind == algo::StepKind::Reduce || step.kind == algo::StepKind::Copy) {
      // On one host a fused receive-reduce folds the reduction into the receive (the link's
      // bandwidth includes it): a zero rate costs nothing.
      const bool fused = t_.fused_reduce > 0 && s_.nhosts <= 1;
      const double bw =
          step.kind == algo::StepKind::Reduce ? (fused ? 0 : t_.reduce_gbps) : t_.intra.gbps * 4;
      const double start = std::max(t, st.cpu_free);
      st.cpu_free = start + us(static_cast<double>(step.dst.bytes), bw / share_);
      events_.emplace(st.cpu_free, r, s);
      return;
    }
    try_lane(r, st.lane_of[s]);
  }

  // Starts the head of a lane while it is ready (and, for a receive, its message was sent).
  void try_lane(int r, std::uint32_t lane_id) {
    RankState& st = ranks_[static_cast<std::size_t>(r)];
    Lane& lane = st.lanes[lane_id];
    while (lane.next < lane.steps.size()) {
      const std::uint32_t s = lane.steps[lane.next];
      if (st.ready[s] < 0) return;
      const auto& step = st.plan.steps[s];
      const std::uint64_t chan =
          static_cast<std::uint64_t>(r) << 32 | static_cast<std::uint32_t>(step.peer);
      if (step.kind == algo::StepKind::Recv) {
        auto& q =
            channels_[static_cast<std::uint64_t>(step.peer) << 32 | static_cast<std::uint32_t>(r)];
        if (q.empty()) return;
        events_.emplace(std::max(st.ready[s], q.front()), r, s);
        q.pop_front();
        ++lane.next;
        continue;
      }
      const bool cross = host(r) != host(step.peer);
      const select::Link& link = cross ? t_.inter : t_.intra;
      const double bytes = static_cast<double>(step.src.bytes);
      double start = std::max(st.ready[s], st.port_free);
      const auto path = bytes < single_copy_min_ ? select::Path::Eager : select::Path::Direct;
      double dur =
          us(bytes, cross ? link.gbps : select::intra_link_gbps(s_, t_, bytes_, bytes, 0, path));
      if (cross && t_.nic_gbps > 0) {
        double& nic = nic_free_[static_cast<std::size_t>(host(r))];
        start = std::max(start, nic);
        dur = std::max(dur, us(bytes, t_.nic_gbps));
        nic = start + us(bytes, t_.nic_gbps);
      }
      st.port_free = start + dur;
      const double arrival = start + dur + link.alpha_us + extra_alpha_;
      events_.emplace(arrival, r, s);
      channels_[chan].push_back(arrival);
      ++lane.next;
      RankState& peer = ranks_[static_cast<std::size_t>(step.peer)];
      auto it = peer.lane_index.find(static_cast<std::uint64_t>(r) * 2);
      if (it != peer.lane_index.end()) try_lane(step.peer, it->second);
    }
  }

  Shape s_;
  Tuning t_;
  double bytes_;  // the collective's buffer: the model's intra-host rate depends on it
  double extra_alpha_ = 0, share_ = 1, single_copy_min_ = 0;
  std::vector<double> nic_free_;
  std::vector<RankState> ranks_;
  std::unordered_map<std::uint64_t, std::deque<double>> channels_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
};

}  // namespace

Result<ReplayResult> replay(Coll coll, Algo algo, std::size_t bytes, const Shape& shape,
                            const Tuning& t, const Pipeline& p, std::size_t max_steps) {
  if (!select::supports(coll, algo))
    return make_error(ErrorCode::InvalidArgument, "{} has no {} schedule", to_string(coll),
                      to_string(algo));
  std::vector<std::vector<int>> hosts(static_cast<std::size_t>(shape.nhosts));
  for (int r = 0; r < shape.nranks; ++r)
    hosts[static_cast<std::size_t>(r / std::max(1, shape.per_host))].push_back(r);
  Replay sim(shape, t, static_cast<double>(bytes));
  ReplayResult out;
  for (int r = 0; r < shape.nranks; ++r) {
    algo::Plan plan = build(coll, algo, r, bytes, shape, hosts, p);
    out.steps += plan.steps.size();
    if (out.steps > max_steps)
      return make_error(ErrorCode::InvalidArgument,
                        "replay of {} {} at {} ranks needs more than {} steps; use the model",
                        to_string(algo), to_string(coll), shape.nranks, max_steps);
    sim.add_rank(std::move(plan));
  }
  LOOM_ASSIGN_OR_RETURN(out.us, sim.run());
  return out;
}

}  // namespace loom::sim
