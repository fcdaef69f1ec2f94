#include "tools/loom_trace/report.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <set>
#include <vector>

#include "core/failure_monitor.hpp"
#include "tools/loom_trace/p2p_report.hpp"

namespace loom::trace {

namespace {

// "0-2,5" for {0, 1, 2, 5}, as loom's own reports write them.
std::string ranks_text(const std::vector<int>& ranks) {
  return loom::detail::format_rank_ranges(ranks);
}

std::string when_written(const std::string& reason) {
  if (reason == "failure") return "written when a call failed";
  if (reason == "destroyed") return "written when the communicator went";
  if (reason == "signal") return "written on SIGUSR1";
  if (reason == "asked") return "saved by the application";
  return "written (" + reason + ")";
}

void header(const CommRecords& comm, std::ostream& out) {
  fmt::print(out, "communicator {}: records from {} of {} ranks\n", comm.id, comm.ranks.size(),
             comm.nranks);
  for (const auto& [r, rec] : comm.ranks) {
    std::string span = rec.calls.empty() ? "no calls"
                                         : fmt::format("calls #{}-#{}", rec.calls.front().seq,
                                                       rec.calls.back().seq);
    if (!rec.p2p.empty()) span += fmt::format(", {} sends and receives", rec.p2p.size());
    fmt::print(out, "  rank {} (host {}, pid {}): {}, {}: {}\n", r, rec.host, rec.pid, span,
               when_written(rec.reason), rec.status);
  }
}

bool missing_ranks(const CommRecords& comm, std::ostream& out) {
  std::vector<int> missing;
  for (int r = 0; r < comm.nranks; ++r)
    if (!comm.ranks.count(r)) missing.push_back(r);
  if (missing.empty()) return false;
  fmt::print(out, "  no record from rank(s) {}: killed, or LOOM_FLIGHT_DIR not shared with them\n",
             ranks_text(missing));
  return true;
}

std::set<std::uint64_t> all_seqs(const CommRecords& comm) {
  std::set<std::uint64_t> seqs;
  for (const auto& [r, rec] : comm.ranks)
    for (const Call& c : rec.calls) seqs.insert(c.seq);
  return seqs;
}

bool first_mismatch(const CommRecords& comm, const std::set<std::uint64_t>& seqs,
                    std::ostream& out) {
  for (std::uint64_t s : seqs) {
    std::map<std::string, std::vector<int>> by_signature;
    for (const auto& [r, rec] : comm.ranks)
      if (const Call* c = rec.find(s)) by_signature[c->signature()].push_back(r);
    if (by_signature.size() < 2) continue;
    fmt::print(out, "  MISMATCH at call #{}:", s);
    for (const auto& [sig, ranks] : by_signature)
      fmt::print(out, " rank(s) {} called {};", ranks_text(ranks), sig);
    fmt::print(out, "\n");
    return true;
  }
  return false;
}

// The lowest call number some rank has not completed, with who waits in it and who never came.
bool first_stall(const CommRecords& comm, const std::set<std::uint64_t>& seqs, std::ostream& out) {
  for (std::uint64_t s : seqs) {
    std::vector<int> waiting, absent, done;
    std::int64_t longest = 0;
    std::string what;
    for (const auto& [r, rec] : comm.ranks) {
      const Call* c = rec.find(s);
      const bool never = c == nullptr && (rec.calls.empty() || rec.calls.back().seq < s);
      if (c != nullptr && c->state != "completed") {
        waiting.push_back(r);
        what = c->call;
        const std::int64_t since = c->started != 0 ? c->started : c->submitted;
        longest = std::max(longest, rec.written - since);
      } else if (never) {
        absent.push_back(r);
      } else {
        done.push_back(r);  // completed, or older than what this rank remembers (it went on)
      }
    }
    if (waiting.empty() && absent.empty()) continue;
    if (waiting.empty()) return false;  // the newest calls: some ranks have not made them yet
    fmt::print(out, "  STALLED at call #{}: rank(s) {} in {} (waiting up to {} when recorded)", s,
               ranks_text(waiting), what, milliseconds(longest));
    if (!absent.empty()) {
      fmt::print(out, "; rank(s) {} never called it", ranks_text(absent));
      for (int r : absent) {
        const RankRecord& rec = comm.ranks.at(r);
        if (!rec.calls.empty())
          fmt::print(out, " (rank {}'s last call: {}, {})", r, rec.calls.back().call,
                     rec.calls.back().state);
      }
    }
    if (!done.empty()) fmt::print(out, "; rank(s) {} completed it", ranks_text(done));
    fmt::print(out, "\n");
    return true;
  }
  return false;
}

// Per rank: how often it started a call last and how far behind the first starter it was.
void stragglers(const CommRecords& comm, const std::set<std::uint64_t>& seqs, int top,
                std::ostream& out) {
  struct Lateness {
    int last = 0;
    std::int64_t total = 0;
    std::int64_t worst = 0;
  };
  std::map<int, Lateness> per_rank;
  std::vector<std::pair<std::int64_t, std::string>> slowest;
  int calls = 0;
  for (std::uint64_t s : seqs) {
    std::vector<std::pair<int, const Call*>> present;
    for (const auto& [r, rec] : comm.ranks)
      if (const Call* c = rec.find(s); c != nullptr && c->started != 0 && !c->algorithm.empty())
        present.emplace_back(r, c);
    if (static_cast<int>(present.size()) != comm.nranks || comm.nranks < 2) continue;
    ++calls;
    std::int64_t first = present.front().second->started, last = first, end = 0;
    int last_rank = present.front().first;
    for (const auto& [r, c] : present) {
      first = std::min(first, c->started);
      if (c->started > last) last = c->started, last_rank = r;
      end = std::max(end, c->completed);
    }
    ++per_rank[last_rank].last;
    for (const auto& [r, c] : present) {
      per_rank[r].total += c->started - first;
      per_rank[r].worst = std::max(per_rank[r].worst, c->started - first);
    }
    if (end != 0) slowest.emplace_back(end - first, present.front().second->call);
  }
  if (calls == 0) return;
  fmt::print(out,
             "  arrivals over the {} calls every rank recorded (start: when a rank's call "
             "began to run):\n",
             calls);
  std::vector<std::pair<int, Lateness>> rows(per_rank.begin(), per_rank.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.total > b.second.total; });
  fmt::print(out, "    {:>6} {:>14} {:>22} {:>18}\n", "rank", "started last", "mean behind first",
             "most behind");
  for (std::size_t i = 0; i < rows.size() && static_cast<int>(i) < top; ++i) {
    const auto& [r, l] = rows[i];
    fmt::print(out, "    {:>6} {:>14} {:>22} {:>18}\n", r, fmt::format("{} of {}", l.last, calls),
               milliseconds(l.total / calls), milliseconds(l.worst));
  }
  std::sort(slowest.begin(), slowest.end(), std::greater<>());
  fmt::print(out, "  slowest calls (first start to last completion):\n");
  for (std::size_t i = 0; i < slowest.size() && static_cast<int>(i) < std::min(top, 5); ++i)
    fmt::print(out, "    {:>12}  {}\n", milliseconds(slowest[i].first), slowest[i].second);
}

}  // namespace

bool report(const CommRecords& comm, std::ostream& out, int top) {
  header(comm, out);
  bool problem = missing_ranks(comm, out);
  const std::set<std::uint64_t> seqs = all_seqs(comm);
  const bool collective = first_mismatch(comm, seqs, out) || first_stall(comm, seqs, out);
  const bool p2p = p2p_stalls(comm, out, top);
  if (collective || p2p)
    problem = true;
  else
    fmt::print(out, "  every call the ranks recorded matches, and none is stuck\n");
  stragglers(comm, seqs, top, out);
  return problem;
}

}  // namespace loom::trace
