// loom-trace's report on one communicator's flight records: which ranks wrote one, the first
// call number on which they disagree (a mismatch) or at which some are stuck (and who never got
// there), the sends and receives left unfinished (p2p_report.hpp), which ranks start calls last
// (stragglers) and the slowest calls.
#pragma once

#include <ostream>

#include "tools/loom_trace/records.hpp"

namespace loom::trace {

/// Writes the report; returns whether it found a problem (a rank without a record, a
/// mismatch or a stall, of a collective call or of a send or receive).
bool report(const CommRecords& comm, std::ostream& out, int top);

}  // namespace loom::trace
