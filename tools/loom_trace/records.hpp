// loom-trace's input: the flight records ranks wrote (LOOM_FLIGHT_DIR, or
// Communicator::flight_record() saved by the application), read and grouped by communicator.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace loom::trace {

/// One collective call as one rank recorded it. Times are wall-clock nanoseconds (each file's
/// steady-clock readings moved by its own clock pair); 0: not reached.
struct Call {
  std::uint64_t seq = 0;
  std::string op;    // "allreduce"
  std::string call;  // "allreduce #3 (4 x float, sum)"
  std::string dtype;
  std::string redop;
  int root = -1;
  std::uint64_t count = 0;
  std::string algorithm;
  std::string state;  // completed, running, queued
  std::int64_t submitted = 0;
  std::int64_t started = 0;
  std::int64_t completed = 0;
  /// What must agree between ranks for one call number (count too, but for alltoallv).
  [[nodiscard]] std::string signature() const;
};

/// One rank's record.
struct RankRecord {
  int rank = 0;
  int nranks = 0;
  std::string host;
  long pid = 0;
  std::string reason;
  std::string status;
  std::int64_t written = 0;  // wall-clock ns when it was written
  std::string file;
  std::vector<Call> calls;  // ascending seq
  [[nodiscard]] const Call* find(std::uint64_t seq) const;
};

/// The records of one communicator, by rank (the newest file of a rank wins).
struct CommRecords {
  std::string id;
  int nranks = 0;
  std::map<int, RankRecord> ranks;
};

/// Reads every loom-flight-*.json file named, or found in a directory named. Throws
/// std::runtime_error naming the file that is not a flight record.
std::map<std::string, CommRecords> load(const std::vector<std::string>& paths);

}  // namespace loom::trace
