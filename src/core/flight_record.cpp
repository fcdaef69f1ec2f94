#include "core/flight_record.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "collective/kinds.hpp"
#include "common/socket.hpp"

namespace loom::detail {

namespace {

using Json = nlohmann::ordered_json;

Json time_or_null(std::int64_t ns) {
  return ns == 0 ? Json(nullptr) : Json(ns);
}

std::string_view state_of(const CallRecord& c) {
  if (c.completed_ns != 0) return "completed";
  return c.started_ns != 0 ? "running" : "queued";
}

Json call_json(const CallRecord& c) {
  const coll::OpDesc& op = c.op;
  Json j = {{"seq", c.seq},
            {"op", coll::to_string(op.kind)},
            {"call", coll::describe(op)},
            {"dtype", to_string(op.dtype)},
            {"count", op.count}};
  if (op.has_redop()) j["redop"] = to_string(op.redop);
  if (op.has_root()) j["root"] = op.root;
  j["algorithm"] = std::string(c.algorithm.data());
  j["state"] = state_of(c);
  j["submitted_ns"] = c.submitted_ns;
  j["started_ns"] = time_or_null(c.started_ns);
  j["completed_ns"] = time_or_null(c.completed_ns);
  return j;
}

std::string_view state_of(const P2PRecord& c) {
  if (c.completed) return "completed";
  return c.started ? "running" : "queued";
}

// One direction of a p2p call: the peer and the per-pair message number (null while unknown: a
// receive from any source before it finds its sender, or one numbered only when it starts).
Json direction(int peer, std::uint64_t seq, bool known, std::size_t count) {
  return {{"peer", peer}, {"seq", known ? Json(seq) : Json(nullptr)}, {"count", count}};
}

Json p2p_json(const P2PRecord& c) {
  const coll::P2PDesc& p = c.op.p2p;
  Json j = {{"id", c.id},
            {"call", coll::describe(c.op)},
            {"dtype", to_string(c.op.dtype)},
            {"tag", p.tag}};
  if (p.to >= 0) j["send"] = direction(p.to, p.send_seq, true, c.op.count);
  if (p.receives())
    j["recv"] = direction(p.from, p.recv_seq, p.from >= 0 && !p.recv_deferred, p.recv_count);
  j["before_call"] = c.op.seq;  // the collective call number next after it on this rank
  j["state"] = state_of(c);
  j["submitted_ns"] = c.submitted_ns;
  j["started_ns"] = time_or_null(c.started ? c.started_ns : 0);
  j["completed_ns"] = time_or_null(c.completed ? c.completed_ns : 0);
  return j;
}

}  // namespace

std::string flight_record_json(const FlightHeader& header, const std::vector<CallRecord>& calls,
                               const std::vector<P2PRecord>& p2p) {
  using namespace std::chrono;
  const auto steady = duration_cast<nanoseconds>(steady_clock::now().time_since_epoch()).count();
  const auto wall = duration_cast<nanoseconds>(system_clock::now().time_since_epoch()).count();
  Json doc = {{"loom_flight_record", 1},
              {"communicator", fmt::format("{:016x}", header.comm_id)},
              {"rank", header.rank},
              {"nranks", header.nranks},
              {"host", net::host_name()},
              {"pid", ::getpid()},
              {"reason", header.reason},
              {"status", header.status},
              {"clock", {{"steady_ns", steady}, {"system_ns", wall}}},
              {"calls", Json::array()}};
  for (const CallRecord& c : calls) doc["calls"].push_back(call_json(c));
  doc["p2p"] = Json::array();
  for (const P2PRecord& c : p2p) doc["p2p"].push_back(p2p_json(c));
  // Invalid UTF-8 in a message (a peer's host name, say) is replaced, never thrown.
  return doc.dump(1, ' ', false, Json::error_handler_t::replace) + "\n";
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
