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
/// ctx.config and ctx.secret, before the layout is known (its card_address() goes into the
/// rank's card).
Result<std::unique_ptr<Transport>> listen(const CreateContext& ctx);
/// Tells a listening TcpTransport its peers' addresses (ctx.peer_addresses, when known) and how
/// many ranks share its host.
Status complete(Transport& listening, const CreateContext& ctx);
/// listen, then complete.
Result<std::unique_ptr<Transport>> make_transport(const CreateContext& ctx);

/// tcp's row in the transport registry: make_transport, listen as its prepare hook (the
/// communicator opens it before the layout exchange), complete and its settings' check.
Entry registry_entry();

}  // namespace loom::transport::tcp
