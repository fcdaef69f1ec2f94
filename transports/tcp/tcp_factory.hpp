// The tcp transport's settings (LOOM_SOCKETS_PER_PEER, LOOM_SOCKET_*, LOOM_TCP_THREADS,
// LOOM_HELLO_TIMEOUT) and its factory for the transport registry (transports/registry.hpp).
#pragma once

#include "config/config.hpp"
#include "transports/registry.hpp"
#include "transports/tcp/tcp_transport.hpp"

namespace loom::transport::tcp {

/// The tcp settings of `cfg`, as given (check_options says whether they are in range); the
/// secret is left empty.
TcpOptions options_from(const config::Config& cfg);
/// InvalidUsage naming the setting when LOOM_SOCKETS_PER_PEER or LOOM_HELLO_TIMEOUT is out of
/// range.
Status check_options(const TcpOptions& o);

/// A TcpTransport listening on ctx.data_address (its port, 0 for any), with the tcp settings of
/// ctx.config and ctx.secret; it knows its peers' addresses when ctx.peer_addresses has them.
Result<std::unique_ptr<Transport>> make_transport(const CreateContext& ctx);

}  // namespace loom::transport::tcp
