#include "transports/tcp/tcp_factory.hpp"

#include "transports/tcp/tcp_rails.hpp"

namespace loom::transport::tcp {

TcpOptions options_from(const config::Config& cfg) {
  TcpOptions o;
  o.sockets_per_peer = static_cast<int>(cfg.get_int("LOOM_SOCKETS_PER_PEER"));
  o.socket_buffer = cfg.get_size("LOOM_SOCKET_BUFFER");
  o.stripe_min = cfg.get_size("LOOM_SOCKET_STRIPE_MIN");
  o.progress_threads = static_cast<int>(cfg.get_int("LOOM_TCP_THREADS"));
  o.hello_timeout = cfg.get_duration("LOOM_HELLO_TIMEOUT");
  return o;
}

Status check_options(const TcpOptions& o) {
  if (o.sockets_per_peer < 0 || o.sockets_per_peer > 16)
    return make_error(ErrorCode::InvalidUsage, "LOOM_SOCKETS_PER_PEER={} is outside [0, 16]",
                      o.sockets_per_peer);
  if (o.hello_timeout < std::chrono::milliseconds(100) ||
      o.hello_timeout > std::chrono::seconds(600))
    return make_error(ErrorCode::InvalidUsage, "LOOM_HELLO_TIMEOUT={} ms is outside [100ms, 600s]",
                      o.hello_timeout.count());
  return Status::ok();
}

Result<std::unique_ptr<Transport>> listen(const CreateContext& ctx) {
  TcpOptions o = options_from(*ctx.config);
  LOOM_RETURN_IF_ERROR(check_options(o));
  o.secret = ctx.secret;
  auto rails = extra_rails(*ctx.config);
  if (!rails.is_ok()) return rails.status().with_context(fmt::format("rank {}", ctx.rank));
  o.rails = std::move(rails).value();
  LOOM_ASSIGN_OR_RETURN(
      auto t, TcpTransport::listen(ctx.rank, ctx.nranks, ctx.comm_id, ctx.data_address, o));
  return std::unique_ptr<Transport>(std::move(t));
}

Status complete(Transport& listening, const CreateContext& ctx) {
  auto* t = dynamic_cast<TcpTransport*>(&listening);
  if (t == nullptr)
    return make_error(ErrorCode::Internal, "rank {}: completing a '{}' transport as tcp", ctx.rank,
                      listening.name());
  if (!ctx.peer_addresses.empty()) t->set_peer_addresses(ctx.peer_addresses);
  t->set_peer_rails(ctx.peer_rails);
  t->set_ranks_on_host(ctx.ranks_on_host);
  return Status::ok();
}

Result<std::unique_ptr<Transport>> make_transport(const CreateContext& ctx) {
  LOOM_ASSIGN_OR_RETURN(auto t, listen(ctx));
  LOOM_RETURN_IF_ERROR(complete(*t, ctx));
  return t;
}

namespace {

Status check_settings(const config::Config& cfg) {
  return check_options(options_from(cfg));
}

}  // namespace

Entry registry_entry() {
  return {.create = &make_transport,
          .prepare = &listen,
          .complete = &complete,
          .check_settings = &check_settings};
}

}  // namespace loom::transport::tcp
