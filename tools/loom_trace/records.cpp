#include "tools/loom_trace/records.hpp"

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

const Call* RankRecord::find(std::uint64_t seq) const {
  for (const Call& c : calls)
    if (c.seq == seq) return &c;
  return nullptr;
}

namespace {

std::int64_t time_of(const json& v, std::int64_t shift) {
  return v.is_null() ? 0 : v.get<std::int64_t>() + shift;
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
