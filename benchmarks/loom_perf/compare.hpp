// loom-perf over chosen transports: --transport NAME and --compare-transports A,B[,C] (the same
// sweep over a communicator per transport, one table with a busbw column per transport and the
// ratio of the first two), and --json FILE with every row.
#pragma once

#include <string>
#include <vector>

#include "benchmarks/loom_perf/options.hpp"
#include "benchmarks/loom_perf/table.hpp"
#include "loom/communicator.hpp"

namespace loom::perf {

/// The settings that force one transport (and forbid ofi's fallback to tcp, so a column never
/// measures something other than its name).
CommOptions transport_options(const std::string& transport);

/// Runs the sweep over every transport of options.transports on communicators derived from
/// `world`; rank 0 prints the table (and writes the JSON). Returns the exit status.
int run_compare(Communicator& world, const Options& options);

/// Writes rows per transport as JSON: {"collective", "nranks", "runs": [{"transport", "rows":
/// [{"bytes", "count", "type", "op", "root", "out_of_place": {...}, "in_place": {...}}]}]}.
void write_json(const std::string& path, const Options& options, int nranks,
                const std::vector<std::string>& transports,
                const std::vector<std::vector<RowResult>>& runs);

}  // namespace loom::perf
