// loom-trace's report on sends and receives: each one a rank had not completed when it wrote
// its record, with what the peer's record says of the other side (never sent, never received,
// or its matching call and where that stands).
#pragma once

#include <ostream>

#include "tools/loom_trace/records.hpp"

namespace loom::trace {

/// Writes a "P2P STALLED" line per unfinished send or receive (at most `top`); returns whether
/// there was one.
bool p2p_stalls(const CommRecords& comm, std::ostream& out, int top);

}  // namespace loom::trace
