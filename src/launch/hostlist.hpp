// Slurm hostlist expressions ("node[01-04,07],login1", "rack[1-2]-gpu[3,5]") expanded into host
// names, in the order Slurm assigns them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.hpp"

namespace loom::launch {

/// Expands a comma-separated hostlist. Each element is a host name that may contain bracketed
/// range lists: "prefix[a-b,c,d-e]suffix"; several bracket groups multiply out, the leftmost
/// varying slowest. Zero padding follows the lower bound of each range ("01-10" -> 01..10).
/// Malformed text (unbalanced brackets, reversed or non-numeric ranges, empty names) and lists
/// expanding to more than `max_hosts` names are InvalidArgument errors naming the text.
Result<std::vector<std::string>> expand_hostlist(std::string_view text,
                                                 std::size_t max_hosts = 1 << 20);

/// The first host of a hostlist (where Slurm places task 0 of a block-distributed step).
Result<std::string> first_host(std::string_view text);

}  // namespace loom::launch
