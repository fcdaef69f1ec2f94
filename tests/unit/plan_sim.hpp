// Test harness: runs every rank's Plan in one thread over in-memory FIFO channels, the way the
// executor would (sends and receives per peer in plan order, local steps when their
// dependencies are done). Detects deadlocks, size mismatches and unmatched messages.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "algorithms/plan.hpp"
#include "kernels/host/reduce.hpp"

namespace loom::test {

/// Plan parameters (algo::RingParams, algo::TreeParams) for one rank, with the fields every plan
/// test sets; the others keep their defaults.
template <typename P>
P plan_params(int rank, int nranks, std::size_t count, std::size_t elem_size) {
  P p;
  p.rank = rank;
  p.nranks = nranks;
  p.count = count;
  p.elem_size = elem_size;
  return p;
}

/// One rank's memory: send and recv live in `mem` at their offsets (equal offsets or overlapping
/// ranges model in-place calls).
struct SimRank {
  algo::Plan plan;
  std::vector<std::uint8_t> mem;
  std::size_t send_off = 0, send_bytes = 0, recv_off = 0, recv_bytes = 0;
  std::vector<std::uint8_t> scratch;
};

/// Checks that no two steps of `plan` that touch overlapping memory (one of them writing) can run
/// concurrently, i.e. each such pair is ordered by the dependency graph. `send_off`/`recv_off`
/// place the Send and Recv buffers in one address space so in-place aliasing counts.
inline std::string find_hazard(const algo::Plan& plan, std::size_t send_off, std::size_t recv_off) {
  const std::size_t n = plan.steps.size();
  std::vector<std::vector<bool>> before(n, std::vector<bool>(n, false));  // before[j][i]: i -> j
  for (std::size_t j = 0; j < n; ++j) {
    const auto& s = plan.steps[j];
    for (std::uint32_t d = 0; d < s.dep_count; ++d) {
      std::size_t i = plan.deps[s.dep_begin + d];
      before[j][i] = true;
      for (std::size_t k = 0; k < n; ++k)
        if (before[i][k]) before[j][k] = true;
    }
  }
  struct Access {
    std::size_t begin, end;
    bool scratch, write;
  };
  auto place = [&](const algo::Span& sp, bool write) {
    std::size_t base = sp.buf == algo::BufId::Send   ? send_off
                       : sp.buf == algo::BufId::Recv ? recv_off
                                                     : 0;
    return Access{base + sp.offset, base + sp.offset + sp.bytes, sp.buf == algo::BufId::Scratch,
                  write};
  };
  auto accesses = [&](const algo::Step& s) {
    std::vector<Access> a;
    switch (s.kind) {
      case algo::StepKind::Send: a = {place(s.src, false)}; break;
      case algo::StepKind::Recv: a = {place(s.dst, true)}; break;
      case algo::StepKind::Copy: a = {place(s.src, false), place(s.dst, true)}; break;
      case algo::StepKind::Reduce:
        a = {place(s.src, false), place(s.src2, false), place(s.dst, true)};
        break;
    }
    return a;
  };
  for (std::size_t j = 0; j < n; ++j)
    for (std::size_t i = 0; i < j; ++i) {
      if (before[j][i]) continue;
      for (const Access& x : accesses(plan.steps[i]))
        for (const Access& y : accesses(plan.steps[j]))
          if ((x.write || y.write) && x.scratch == y.scratch && x.begin < y.end && y.begin < x.end)
            return "steps " + std::to_string(i) + " and " + std::to_string(j) + " race";
    }
  return "";
}

/// Returns "" on success, else a description of what went wrong.
inline std::string simulate(std::vector<SimRank>& ranks, DataType dtype, RedOp op) {
  const std::size_t n = ranks.size();
  std::map<std::pair<std::size_t, int>, std::deque<std::vector<std::uint8_t>>> chan;
  struct State {
    std::vector<bool> done;
    std::map<std::pair<int, bool>, std::size_t> lane_pos;  // (peer, is_send) -> next index
    std::map<std::pair<int, bool>, std::vector<std::uint32_t>> lanes;
    std::size_t ndone = 0;
  };
  std::vector<State> st(n);
  for (std::size_t r = 0; r < n; ++r) {
    ranks[r].scratch.assign(std::max<std::size_t>(ranks[r].plan.scratch_bytes, 1), 0xcd);
    st[r].done.assign(ranks[r].plan.steps.size(), false);
    for (std::uint32_t i = 0; i < ranks[r].plan.steps.size(); ++i) {
      const auto& s = ranks[r].plan.steps[i];
      if (s.kind == algo::StepKind::Send || s.kind == algo::StepKind::Recv)
        st[r].lanes[{s.peer, s.kind == algo::StepKind::Send}].push_back(i);
    }
  }
  auto addr = [&](SimRank& rk, const algo::Span& sp) -> std::uint8_t* {
    if (sp.buf == algo::BufId::Scratch)
      return sp.offset + sp.bytes <= rk.scratch.size() ? rk.scratch.data() + sp.offset : nullptr;
    std::size_t off = sp.buf == algo::BufId::Send ? rk.send_off : rk.recv_off;
    std::size_t lim = sp.buf == algo::BufId::Send ? rk.send_bytes : rk.recv_bytes;
    if (sp.offset + sp.bytes > lim) return nullptr;
    return rk.mem.data() + off + sp.offset;
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (std::size_t r = 0; r < n; ++r) {
      SimRank& rk = ranks[r];
      for (std::uint32_t i = 0; i < rk.plan.steps.size(); ++i) {
        if (st[r].done[i]) continue;
        const auto& s = rk.plan.steps[i];
        bool ready = true;
        for (std::uint32_t d = 0; d < s.dep_count; ++d)
          ready = ready && st[r].done[rk.plan.deps[s.dep_begin + d]];
        if (!ready) continue;
        bool is_send = s.kind == algo::StepKind::Send;
        if (s.kind == algo::StepKind::Send || s.kind == algo::StepKind::Recv) {
          auto key = std::make_pair(s.peer, is_send);
          auto& pos = st[r].lane_pos[key];
          if (st[r].lanes[key][pos] != i) continue;  // not this lane's turn
          if (is_send) {
            const algo::Span& sp = s.src;
            std::uint8_t* p = addr(rk, sp);
            if (!p) return "rank " + std::to_string(r) + " send out of bounds";
            chan[{r, s.peer}].emplace_back(p, p + sp.bytes);
          } else {
            auto& q = chan[{static_cast<std::size_t>(s.peer), static_cast<int>(r)}];
            if (q.empty()) continue;
            std::uint8_t* p = addr(rk, s.dst);
            if (!p) return "rank " + std::to_string(r) + " recv out of bounds";
            if (q.front().size() != s.dst.bytes)
              return "size mismatch at rank " + std::to_string(r) + " from " +
                     std::to_string(s.peer);
            if (s.dst.bytes) std::memcpy(p, q.front().data(), s.dst.bytes);
            q.pop_front();
          }
          ++pos;
        } else {
          std::uint8_t* d = addr(rk, s.dst);
          std::uint8_t* a = addr(rk, s.src);
          if (!d || !a) return "local step out of bounds at rank " + std::to_string(r);
          if (s.kind == algo::StepKind::Copy) {
            std::memmove(d, a, s.dst.bytes);
          } else {
            std::uint8_t* b = addr(rk, s.src2);
            if (!b) return "reduce operand out of bounds";
            kernels::reduce(dtype, op, d, a, b, s.dst.bytes / dtype_size(dtype));
          }
        }
        st[r].done[i] = true;
        ++st[r].ndone;
        progress = true;
      }
    }
  }
  for (std::size_t r = 0; r < n; ++r)
    if (st[r].ndone != ranks[r].plan.steps.size())
      return "deadlock: rank " + std::to_string(r) + " finished " + std::to_string(st[r].ndone) +
             " of " + std::to_string(ranks[r].plan.steps.size()) + " steps";
  for (auto& [k, q] : chan)
    if (!q.empty())
      return "unreceived message from " + std::to_string(k.first) + " to " +
             std::to_string(k.second);
  return "";
}

}  // namespace loom::test
