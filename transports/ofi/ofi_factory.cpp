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

Availability availability(const config::Config& cfg, const net::SocketAddress& data_address,
                          bool requested) {
  Availability a;
  if (!requested && !efa_device_present()) {
    a.why_missing =
        "no EFA device on this host (none bound to the efa driver in "
        "/sys/class/infiniband)";
    return a;
  }
  auto found = probe_provider(fabric_request(cfg, data_address));
  if (!found.is_ok()) {
    a.why_missing = found.status().message();
    return a;
  }
  a.available = true;
  a.provider = found->provider;
  a.preferred = found->provider == "efa";
  if (!a.preferred)
    a.why_missing = fmt::format("{}; using {} instead",
                                probe_provider({"efa", ""}).status().message(), found->provider);
  return a;
}

Entry registry_entry() {
  return {.create = &make_transport, .probe = &availability};
}

}  // namespace loom::transport::ofi
