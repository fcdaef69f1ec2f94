// Which transport carries the traffic between two ranks: a pure decision from the ranks' host
// identities and their LOOM_TRANSPORTS allow lists, identical on both sides of every pair.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.hpp"
#include "config/config.hpp"
#include "transports/registry.hpp"

namespace loom::detail {

using transport::kNumTransportKinds;
using transport::to_string;
using transport::TransportKind;

/// "" -> {shm, ofi, tcp}; "tcp,shm" -> that order; "^shm" -> every known transport but shm.
/// Unknown names are an error naming them. "cuda_ipc" entries are accepted and left out (they
/// concern device buffers only: see cuda_ipc_allowed).
Result<std::vector<TransportKind>> parse_transport_list(std::string_view text);
std::string format_transport_list(const std::vector<TransportKind>& kinds);

/// Whether LOOM_TRANSPORTS lets device buffers of ranks on one host use the cuda_ipc transport:
/// yes unless it says "^cuda_ipc" or lists transports without naming cuda_ipc.
Result<bool> cuda_ipc_allowed(std::string_view text);

/// For every peer of `rank`: the first transport in the lower rank's list that the higher
/// rank's list also allows and that can reach the peer (shm only within a host). The entry for
/// `rank` itself is Tcp and unused.
Result<std::vector<TransportKind>> choose_transports(
    int rank, const std::vector<std::string>& host_ids,
    const std::vector<std::vector<TransportKind>>& allowed);

/// Whether any two ranks would talk over `kind` (the same rule as choose_transports). Every rank
/// computes the same answer from the same cards.
bool any_pair_uses(TransportKind kind, const std::vector<std::string>& host_ids,
                   const std::vector<std::vector<TransportKind>>& allowed);

/// Whether the ofi transport can run here, and the provider it would use (the ofi transport's
/// probe in the registry; `preferred`: the provider is EFA). See resolve_transport_list.
using OfiAvailability = transport::Availability;

/// This rank's effective allow list: LOOM_TRANSPORTS with ofi resolved against `ofi`. An ofi
/// that nobody asked for (the default list) is kept only on EFA. An ofi that was asked for (in
/// LOOM_TRANSPORTS, or LOOM_OFI_PROVIDER set) but cannot run is replaced by tcp with a WARN
/// saying why, or is an error when `fallback` is false.
Result<std::vector<TransportKind>> resolve_transport_list(int rank, std::string_view text,
                                                          bool ofi_requested, bool fallback,
                                                          const OfiAvailability& ofi);

/// This rank's allow list for the layout exchange (see resolve_transport_list), as text: ofi is
/// probed (libfabric) when it was asked for or an EFA device is present.
Result<std::string> effective_transports(int rank, const config::Config& cfg,
                                         const net::SocketAddress& data_address);

}  // namespace loom::detail
