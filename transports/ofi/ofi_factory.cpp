#include "transports/ofi/ofi_factory.hpp"

#include "transports/ofi/ofi_transport.hpp"

namespace loom::transport::ofi {

FabricRequest fabric_request(const config::Config& cfg, const net::SocketAddress& data_address) {
  FabricRequest r;
  r.provider = cfg.get_string("LOOM_OFI_PROVIDER");
  auto hp = net::parse_host_port(data_address.to_string());
  if (hp.is_ok()) r.node = hp->host;
  return r;
}

Result<std::unique_ptr<Transport>> make_transport(const CreateContext& ctx) {
  OfiOptions o;
  o.fabric = fabric_request(*ctx.config, ctx.data_address);
  o.liveness_bind = ctx.data_address;
  o.liveness_bind.set_port(0);
  o.secret = ctx.secret;
  o.progress_thread = static_cast<int>(ctx.config->get_int("LOOM_OFI_PROGRESS_THREAD"));
  o.ranks_on_host = ctx.ranks_on_host;
  auto t = OfiTransport::create(ctx.rank, ctx.nranks, ctx.comm_id, ctx.store, o);
  if (!t.is_ok())
    return t.status().with_context(fmt::format("rank {}: opening the ofi transport", ctx.rank));
  return std::unique_ptr<Transport>(std::move(t).value());
}

}  // namespace loom::transport::ofi
