// The ofi transport's factory for the transport registry (transports/registry.hpp), and the
// libfabric request its settings make.
#pragma once

#include "config/config.hpp"
#include "transports/ofi/ofi_fabric.hpp"
#include "transports/registry.hpp"

namespace loom::transport::ofi {

/// The libfabric request for this rank: LOOM_OFI_PROVIDER, and the local address of
/// `data_address` for socket-based providers.
FabricRequest fabric_request(const config::Config& cfg, const net::SocketAddress& data_address);

/// An OfiTransport for ctx.rank (LOOM_OFI_PROVIDER, LOOM_OFI_PROGRESS_THREAD), its liveness
/// listener on ctx.data_address's host.
Result<std::unique_ptr<Transport>> make_transport(const CreateContext& ctx);

/// Whether ofi can run here: libfabric's answer for this rank's request, preferred on EFA. An
/// ofi nobody asked for (`requested` false) runs only on EFA, so without an EFA device this
/// skips fi_getinfo (whose first call loads every provider).
Availability availability(const config::Config& cfg, const net::SocketAddress& data_address,
                          bool requested);

/// The names LOOM_OFI_DOMAINS=near:LIST chooses among; empty for any other value.
std::vector<std::string> near_list(std::string_view setting);

/// At most `max` of `picked`'s NICs for `rank`: a window starting at rank * max (modulo their
/// number), so that the ranks of a host spread over all of them; `why` says so when it cuts.
NicSubset at_most_rails(NicSubset picked, int rank, std::size_t max);

/// ofi's row in the transport registry: make_transport and availability as its probe.
Entry registry_entry();

}  // namespace loom::transport::ofi
