#include "core/flight_record.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "collective/kinds.hpp"

namespace loom::detail {

namespace {

std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20)
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
        else
          out += c;
    }
  }
  return out + "\"";
}

std::string time_or_null(std::int64_t ns) {
  return ns == 0 ? "null" : std::to_string(ns);
}

std::string_view state_of(const CallRecord& c) {
  if (c.completed_ns != 0) return "completed";
  return c.started_ns != 0 ? "running" : "queued";
}

std::string call_json(const CallRecord& c) {
  const coll::OpDesc& op = c.op;
  std::string out =
      fmt::format(R"({{"seq": {}, "op": {}, "call": {}, "dtype": {}, "count": {})", c.seq,
                  json_string(coll::to_string(op.kind)), json_string(coll::describe(op)),
                  json_string(to_string(op.dtype)), op.count);
  if (op.has_redop()) out += fmt::format(R"(, "redop": {})", json_string(to_string(op.redop)));
  if (op.has_root()) out += fmt::format(R"(, "root": {})", op.root);
  out += fmt::format(R"(, "algorithm": {}, "state": {}, "submitted_ns": {}, "started_ns": {}, )"
                     R"("completed_ns": {}}})",
                     json_string(c.algorithm.data()), json_string(state_of(c)), c.submitted_ns,
                     time_or_null(c.started_ns), time_or_null(c.completed_ns));
  return out;
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "?";
  return name;
}

}  // namespace

std::string flight_record_json(const FlightHeader& header, const std::vector<CallRecord>& calls) {
  using namespace std::chrono;
  const auto steady = duration_cast<nanoseconds>(steady_clock::now().time_since_epoch()).count();
  const auto wall = duration_cast<nanoseconds>(system_clock::now().time_since_epoch()).count();
  std::string out = fmt::format(
      "{{\"loom_flight_record\": 1, \"communicator\": \"{:016x}\", \"rank\": {}, \"nranks\": {}, "
      "\"host\": {}, \"pid\": {}, \"reason\": {}, \"status\": {},\n \"clock\": {{\"steady_ns\": "
      "{}, "
      "\"system_ns\": {}}},\n \"calls\": [",
      header.comm_id, header.rank, header.nranks, json_string(host_name()), ::getpid(),
      json_string(header.reason), json_string(header.status), steady, wall);
  for (std::size_t i = 0; i < calls.size(); ++i)
    out += (i == 0 ? "\n  " : ",\n  ") + call_json(calls[i]);
  return out + "\n ]}\n";
}

std::string flight_file_path(const std::string& dir, std::uint64_t comm_id, int rank) {
  return fmt::format("{}/loom-flight-{:016x}-r{}.json", dir, comm_id, rank);
}

Status write_flight_record(const std::string& dir, const FlightHeader& header,
                           const std::string& json) {
  const std::string path = flight_file_path(dir, header.comm_id, header.rank);
  const std::string tmp = fmt::format("{}.{}.tmp", path, ::getpid());
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);  // an existing one is fine; a failure shows below
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr)
    return system_error(errno,
                        fmt::format("rank {}: writing the flight record {}", header.rank, path));
  const bool written = std::fwrite(json.data(), 1, json.size(), f) == json.size();
  const bool closed = std::fclose(f) == 0;
  if (!written || !closed || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    return system_error(err,
                        fmt::format("rank {}: writing the flight record {}", header.rank, path));
  }
  return Status::ok();
}

}  // namespace loom::detail
