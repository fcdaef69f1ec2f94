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

json slice(const Call& c, const RankRecord& rec, int tid, std::int64_t zero) {
  const std::int64_t begin = c.started != 0 ? c.started : c.submitted;
  const std::int64_t end = c.completed != 0 ? c.completed : rec.written;
  return json{{"name", c.call},
              {"cat", c.op},
              {"ph", "X"},
              {"pid", rec.rank},
              {"tid", tid},
              {"ts", static_cast<double>(begin - zero) / 1e3},
              {"dur", static_cast<double>(std::max<std::int64_t>(end - begin, 0)) / 1e3},
              {"args",
               {{"seq", c.seq},
                {"algorithm", c.algorithm},
                {"state", c.state},
                {"queued_us", static_cast<double>(begin - c.submitted) / 1e3}}}};
}

json slice(const P2P& p, const RankRecord& rec, int tid, std::int64_t zero) {
  const std::int64_t begin = p.started != 0 ? p.started : p.submitted;
  const std::int64_t end = p.completed != 0 ? p.completed : rec.written;
  json args = {{"id", p.id},
               {"state", p.state},
               {"tag", p.tag},
               {"queued_us", static_cast<double>(begin - p.submitted) / 1e3}};
  if (p.send) args["to"] = p.send->peer;
  if (p.recv) args["from"] = p.recv->peer;
  return json{{"name", p.call},
              {"cat", p.kind()},
              {"ph", "X"},
              {"pid", rec.rank},
              {"tid", tid},
              {"ts", static_cast<double>(begin - zero) / 1e3},
              {"dur", static_cast<double>(std::max<std::int64_t>(end - begin, 0)) / 1e3},
              {"args", args}};
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
