// Which transport carries the traffic between two ranks: a pure decision from the ranks' host
// identities and their LOOM_TRANSPORTS allow lists, identical on both sides of every pair.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.hpp"

namespace loom::detail {

enum class TransportKind : std::uint8_t { Shm = 0, Tcp = 1 };
std::string_view to_string(TransportKind k);

/// "" -> {shm, tcp}; "tcp,shm" -> that order; "^shm" -> every known transport but shm.
/// Unknown names are an error naming them.
Result<std::vector<TransportKind>> parse_transport_list(std::string_view text);
std::string format_transport_list(const std::vector<TransportKind>& kinds);

/// For every peer of `rank`: the first transport in the lower rank's list that the higher
/// rank's list also allows and that can reach the peer (shm only within a host). The entry for
/// `rank` itself is Tcp and unused.
Result<std::vector<TransportKind>> choose_transports(
    int rank, const std::vector<std::string>& host_ids,
    const std::vector<std::vector<TransportKind>>& allowed);

}  // namespace loom::detail
