#include "tools/loom_trace/chrome.hpp"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

namespace loom::trace {

using nlohmann::json;

namespace {

std::int64_t earliest(const std::map<std::string, CommRecords>& comms) {
  std::int64_t t = std::numeric_limits<std::int64_t>::max();
  for (const auto& [id, comm] : comms)
    for (const auto& [r, rec] : comm.ranks) {
      for (const Call& c : rec.calls)
        if (c.submitted != 0) t = std::min(t, c.submitted);
      for (const P2P& p : rec.p2p)
        if (p.submitted != 0) t = std::min(t, p.submitted);
    }
  return t == std::numeric_limits<std::int64_t>::max() ? 0 : t;
}

// A complete ("X") event from a call's start (else its submission) to its completion (else
// when its record was written).
json slice(const std::string& name, const std::string& cat, std::int64_t submitted,
           std::int64_t started, std::int64_t completed, json args, const RankRecord& rec, int tid,
           std::int64_t zero) {
  const std::int64_t begin = started != 0 ? started : submitted;
  const std::int64_t end = completed != 0 ? completed : rec.written;
  args["queued_us"] = static_cast<double>(begin - submitted) / 1e3;
  return json{{"name", name},
              {"cat", cat},
              {"ph", "X"},
              {"pid", rec.rank},
              {"tid", tid},
              {"ts", static_cast<double>(begin - zero) / 1e3},
              {"dur", static_cast<double>(std::max<std::int64_t>(end - begin, 0)) / 1e3},
              {"args", std::move(args)}};
}

json slice(const Call& c, const RankRecord& rec, int tid, std::int64_t zero) {
  return slice(c.call, c.op, c.submitted, c.started, c.completed,
               {{"seq", c.seq}, {"algorithm", c.algorithm}, {"state", c.state}}, rec, tid, zero);
}

json slice(const P2P& p, const RankRecord& rec, int tid, std::int64_t zero) {
  json args = {{"id", p.id}, {"state", p.state}, {"tag", p.tag}};
  if (p.send) args["to"] = p.send->peer;
  if (p.recv) args["from"] = p.recv->peer;
  return slice(p.call, p.kind(), p.submitted, p.started, p.completed, std::move(args), rec, tid,
               zero);
}

}  // namespace

void write_chrome_trace(const std::map<std::string, CommRecords>& comms, std::ostream& out) {
  const std::int64_t zero = earliest(comms);
  json events = json::array();
  std::map<int, std::string> process_names;
  int tid = 0;
  for (const auto& [id, comm] : comms) {
    ++tid;
    for (const auto& [r, rec] : comm.ranks) {
      process_names[r] = "rank " + std::to_string(r) + " (" + rec.host + ")";
      events.push_back({{"name", "thread_name"},
                        {"ph", "M"},
                        {"pid", r},
                        {"tid", tid},
                        {"args", {{"name", "communicator " + id}}}});
      for (const Call& c : rec.calls) events.push_back(slice(c, rec, tid, zero));
      for (const P2P& p : rec.p2p) events.push_back(slice(p, rec, tid, zero));
    }
  }
  for (const auto& [r, name] : process_names)
    events.push_back(
        {{"name", "process_name"}, {"ph", "M"}, {"pid", r}, {"args", {{"name", name}}}});
  out << json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump() << "\n";
}

}  // namespace loom::trace
