#include "tools/loom_trace/records.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace loom::trace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string Call::signature() const {
  std::string s = op + " " + dtype;
  if (!redop.empty()) s += " " + redop;
  if (root >= 0) s += " root " + std::to_string(root);
  if (op != "alltoallv") s += " count " + std::to_string(count);
  return s;
}

std::string milliseconds(std::int64_t ns) {
  return fmt::format("{:.3f} ms", static_cast<double>(ns) / 1e6);
}

std::string P2P::kind() const {
  if (send && recv) return "sendrecv";
  return send ? "send" : "recv";
}

const P2P* RankRecord::find_p2p(bool send, int peer, std::int64_t seq) const {
  for (const P2P& p : p2p) {
    const std::optional<P2P::Dir>& d = send ? p.send : p.recv;
    if (d && d->peer == peer && d->seq == seq) return &p;
  }
  return nullptr;
}

std::pair<std::int64_t, std::size_t> RankRecord::p2p_span(bool send, int peer) const {
  std::int64_t top = -1;
  std::size_t n = 0;
  for (const P2P& p : p2p) {
    const std::optional<P2P::Dir>& d = send ? p.send : p.recv;
    if (d && d->peer == peer && d->seq >= 0) {
      top = std::max(top, d->seq);
      ++n;
    }
  }
  return {top, n};
}

const Call* RankRecord::find(std::uint64_t seq) const {
  for (const Call& c : calls)
    if (c.seq == seq) return &c;
  return nullptr;
}

namespace {

std::int64_t time_of(const json& v, std::int64_t shift) {
  return v.is_null() ? 0 : v.get<std::int64_t>() + shift;
}

std::optional<P2P::Dir> direction(const json& e, const char* name) {
  if (!e.contains(name)) return std::nullopt;
  const json& d = e.at(name);
  P2P::Dir dir;
  dir.peer = d.value("peer", -1);
  dir.seq = d.contains("seq") && !d.at("seq").is_null() ? d.at("seq").get<std::int64_t>() : -1;
  dir.count = d.value("count", std::uint64_t{0});
  return dir;
}

P2P parse_p2p(const json& e, std::int64_t shift) {
  P2P p;
  p.id = e.at("id").get<std::uint64_t>();
  p.call = e.value("call", "");
  p.dtype = e.value("dtype", "");
  p.tag = e.value("tag", 0);
  p.send = direction(e, "send");
  p.recv = direction(e, "recv");
  p.before_call = e.value("before_call", std::uint64_t{0});
  p.state = e.value("state", "");
  p.submitted = time_of(e.at("submitted_ns"), shift);
  p.started = time_of(e.at("started_ns"), shift);
  p.completed = time_of(e.at("completed_ns"), shift);
  if (p.call.empty()) p.call = p.kind();
  return p;
}

RankRecord parse(const fs::path& file) {
  std::ifstream in(file);
  json doc = json::parse(in, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("loom_flight_record"))
    throw std::runtime_error(file.string() + ": not a loom flight record");
  RankRecord r;
  r.file = file.string();
  r.rank = doc.at("rank").get<int>();
  r.nranks = doc.at("nranks").get<int>();
  r.host = doc.value("host", "?");
  r.pid = doc.value("pid", 0L);
  r.reason = doc.value("reason", "");
  r.status = doc.value("status", "");
  const std::int64_t steady = doc.at("clock").at("steady_ns").get<std::int64_t>();
  const std::int64_t wall = doc.at("clock").at("system_ns").get<std::int64_t>();
  const std::int64_t shift = wall - steady;
  r.written = wall;
  for (const json& c : doc.at("calls")) {
    Call call;
    call.seq = c.at("seq").get<std::uint64_t>();
    call.op = c.at("op").get<std::string>();
    call.call = c.value("call", call.op);
    call.dtype = c.value("dtype", "");
    call.redop = c.value("redop", "");
    call.root = c.value("root", -1);
    call.count = c.value("count", std::uint64_t{0});
    call.algorithm = c.value("algorithm", "");
    call.state = c.value("state", "");
    call.submitted = time_of(c.at("submitted_ns"), shift);
    call.started = time_of(c.at("started_ns"), shift);
    call.completed = time_of(c.at("completed_ns"), shift);
    r.calls.push_back(std::move(call));
  }
  if (doc.contains("p2p"))
    for (const json& e : doc.at("p2p")) r.p2p.push_back(parse_p2p(e, shift));
  return r;
}

std::string comm_of(const fs::path& file) {
  // loom-flight-<16 hex digits>-r<rank>.json
  std::string name = file.filename().string();
  const std::string prefix = "loom-flight-";
  if (name.rfind(prefix, 0) != 0 || name.size() < prefix.size() + 16) return name;
  return name.substr(prefix.size(), 16);
}

void add(std::map<std::string, CommRecords>& out, const fs::path& file) {
  RankRecord r = parse(file);
  CommRecords& c = out[comm_of(file)];
  c.id = comm_of(file);
  c.nranks = std::max(c.nranks, r.nranks);
  auto it = c.ranks.find(r.rank);
  if (it == c.ranks.end() || it->second.written < r.written) c.ranks[r.rank] = std::move(r);
}

}  // namespace

std::map<std::string, CommRecords> load(const std::vector<std::string>& paths) {
  std::map<std::string, CommRecords> out;
  for (const std::string& p : paths) {
    if (fs::is_directory(p)) {
      for (const auto& e : fs::directory_iterator(p)) {
        const std::string name = e.path().filename().string();
        if (name.rfind("loom-flight-", 0) == 0 && e.path().extension() == ".json")
          add(out, e.path());
      }
    } else if (fs::exists(p)) {
      add(out, p);
    } else {
      throw std::runtime_error(p + ": no such file or directory");
    }
  }
  return out;
}

}  // namespace loom::trace
