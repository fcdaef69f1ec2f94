// loom-trace --chrome: the ranks' calls as one Chrome trace (the Trace Event Format that
// Perfetto and chrome://tracing open): a process per rank, a thread per communicator, a slice
// per call from its start to its completion (a call still running ends where its record was
// written).
#pragma once

#include <map>
#include <ostream>
#include <string>

#include "tools/loom_trace/records.hpp"

namespace loom::trace {

void write_chrome_trace(const std::map<std::string, CommRecords>& comms, std::ostream& out);

}  // namespace loom::trace
