// The flight record: a rank's last collective calls (the call ledger's records) as a JSON
// document, and the file each rank writes under LOOM_FLIGHT_DIR, which loom-trace merges into one
// job's timeline (docs/reliability.md, "Flight recorder").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.hpp"
#include "core/call_ledger.hpp"

namespace loom::detail {

/// Who wrote a flight record, when and why.
struct FlightHeader {
  std::uint64_t comm_id = 0;
  int rank = 0;
  int nranks = 1;
  std::string reason;  // "failure", "signal", "destroyed", "asked"
  std::string status;  // Communicator::status() or the failure
};

/// {"loom_flight_record": 1, "communicator": ..., "rank": ..., "clock": {steady_ns, system_ns},
///  "calls": [{"seq", "op", "call", "dtype", "count", "algorithm", "state",
///             "submitted_ns", "started_ns", "completed_ns"}, ...],
///  "p2p": [{"id", "call", "dtype", "tag", "send": {"peer", "seq", "count"},
///           "recv": {"peer", "seq", "count"}, "before_call", "state", times...}, ...]}
/// (steady-clock times; "clock" pairs one steady reading with the wall clock's, so records of
/// several hosts line up; a p2p call has "send", "recv" or both; "seq" is the message's number
/// on that pair and direction, null while unknown).
std::string flight_record_json(const FlightHeader& header, const std::vector<CallRecord>& calls,
                               const std::vector<P2PRecord>& p2p);

/// `dir`/loom-flight-<communicator>-r<rank>.json, written whole (a temporary file renamed).
std::string flight_file_path(const std::string& dir, std::uint64_t comm_id, int rank);
Status write_flight_record(const std::string& dir, const FlightHeader& header,
                           const std::string& json);

}  // namespace loom::detail
