// loom-trace's input: the flight records ranks wrote (LOOM_FLIGHT_DIR, or
// Communicator::flight_record() saved by the application), read and grouped by communicator.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
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

/// One send, receive or sendrecv as one rank recorded it (times as Call's).
struct P2P {
  /// One direction: the peer, and the message's number on that pair and direction (-1: not
  /// known yet, a receive from any source before it found its sender).
  struct Dir {
    int peer = -1;
    std::int64_t seq = -1;
    std::uint64_t count = 0;
  };
  std::uint64_t id = 0;
  std::string call;  // "recv #3 from rank 0 (8 x float, tag 0)"
  std::string dtype;
  int tag = 0;
  std::optional<Dir> send, recv;
  std::uint64_t before_call = 0;  // the collective call number next after it
  std::string state;
  std::int64_t submitted = 0;
  std::int64_t started = 0;
  std::int64_t completed = 0;
  /// "send", "recv" or "sendrecv".
  [[nodiscard]] std::string kind() const;
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
  std::vector<P2P> p2p;     // ascending id (records written before p2p was recorded: none)
  [[nodiscard]] const Call* find(std::uint64_t seq) const;
  /// Its p2p call with message `seq` to (`send`) or from `peer`, if remembered.
  [[nodiscard]] const P2P* find_p2p(bool send, int peer, std::int64_t seq) const;
  /// The highest message number it recorded to (`send`) or from `peer` (-1: none), and how
  /// many such messages it recorded.
  [[nodiscard]] std::pair<std::int64_t, std::size_t> p2p_span(bool send, int peer) const;
};

/// The records of one communicator, by rank (the newest file of a rank wins).
struct CommRecords {
  std::string id;
  int nranks = 0;
  std::map<int, RankRecord> ranks;
};

/// "1.234 ms".
std::string milliseconds(std::int64_t ns);

/// Reads every loom-flight-*.json file named, or found in a directory named. Throws
/// std::runtime_error naming the file that is not a flight record.
std::map<std::string, CommRecords> load(const std::vector<std::string>& paths);

}  // namespace loom::trace
