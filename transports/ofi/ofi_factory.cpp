#include "transports/ofi/ofi_factory.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "common/strings.hpp"
#include "log/log.hpp"
#include "transports/ofi/ofi_rails.hpp"
#include "transports/ofi/ofi_transport.hpp"

namespace loom::transport::ofi {

FabricRequest fabric_request(const config::Config& cfg, const net::SocketAddress& data_address) {
  FabricRequest r;
  r.provider = cfg.get_string("LOOM_OFI_PROVIDER");
  auto hp = net::parse_host_port(data_address.to_string());
  if (hp.is_ok()) r.node = hp->host;
  return r;
}

namespace {

constexpr std::size_t kMaxOfiRails = 8;
constexpr std::size_t kMinOfiStripe = 64u << 10;

OfiOptions options_for(const CreateContext& ctx) {
  OfiOptions o;
  o.fabric = fabric_request(*ctx.config, ctx.data_address);
  o.liveness_bind = ctx.data_address;
  o.liveness_bind.set_port(0);
  o.secret = ctx.secret;
  o.progress_thread = static_cast<int>(ctx.config->get_int("LOOM_OFI_PROGRESS_THREAD"));
  o.ranks_on_host = ctx.ranks_on_host;
  return o;
}

// Points `r` at the NIC named `name`: a network interface (what socket providers' domains are
// named after; they pick theirs by source address, not by domain name) by its address, anything
// else (an EFA device) as the domain's name.
void point_at(FabricRequest& r, std::string_view name) {
  auto a = net::interface_address(name);
  if (a.is_ok()) {
    auto hp = net::parse_host_port(a->to_string());
    r.node = hp.is_ok() ? hp->host : std::string();
    r.domain.clear();
  } else {
    r.node.clear();
    r.domain = std::string(name);
  }
}

// One endpoint per LOOM_OFI_DOMAINS entry, striped over (OfiRails).
Result<std::unique_ptr<Transport>> make_rails(const CreateContext& ctx,
                                              const std::vector<std::string_view>& domains) {
  const std::string list = ctx.config->get_string("LOOM_OFI_DOMAINS");
  if (domains.size() > kMaxOfiRails)
    return make_error(ErrorCode::InvalidUsage,
                      "rank {}: LOOM_OFI_DOMAINS={} names {} domains; at most {} rails", ctx.rank,
                      list, domains.size(), kMaxOfiRails);
  std::vector<std::unique_ptr<OfiTransport>> rails;
  for (std::size_t i = 0; i < domains.size(); ++i) {
    OfiOptions o = options_for(ctx);
    point_at(o.fabric, domains[i]);
    o.rail = static_cast<int>(i);
    auto t = OfiTransport::create(ctx.rank, ctx.nranks, ctx.comm_id, ctx.store, o);
    if (!t.is_ok())
      return t.status().with_context(
          fmt::format("rank {}: opening ofi rail {} on domain '{}' (LOOM_OFI_DOMAINS={})", ctx.rank,
                      i, domains[i], list));
    rails.push_back(std::move(t).value());
  }
  std::size_t stripe_min = ctx.config->get_size("LOOM_OFI_STRIPE_MIN");
  if (stripe_min != 0) stripe_min = std::max(stripe_min, kMinOfiStripe);
  LOOM_LOG_INFO(Net, "rank {}: ofi over {} rails ({}), striping from {} KiB", ctx.rank,
                rails.size(), fmt::join(domains, ","), 2 * stripe_min >> 10);
  return std::unique_ptr<Transport>(
      std::make_unique<OfiRails>(std::move(rails), ctx.nranks, stripe_min));
}

}  // namespace

// LOOM_OFI_DOMAINS as names: its list, or for "all" every (non-loopback) domain of the provider
// the data address would use.
Result<std::vector<std::string>> domain_names(const CreateContext& ctx) {
  const std::string list = ctx.config->get_string("LOOM_OFI_DOMAINS");
  if (list != "all") {
    std::vector<std::string> out;
    for (std::string_view d : comma_tokens(list)) out.emplace_back(d);
    return out;
  }
  LOOM_ASSIGN_OR_RETURN(ProviderInfo p,
                        probe_provider(fabric_request(*ctx.config, ctx.data_address)));
  std::vector<std::string> all = list_domains(p.provider);
  if (all.empty())
    return make_error(ErrorCode::InvalidUsage,
                      "rank {}: LOOM_OFI_DOMAINS=all: provider {} lists no domain but loopback",
                      ctx.rank, p.provider);
  LOOM_LOG_INFO(Net, "rank {}: LOOM_OFI_DOMAINS=all: {} domain(s) of {}: {}", ctx.rank, all.size(),
                p.provider, fmt::join(all, ","));
  return all;
}

Result<std::unique_ptr<Transport>> make_transport(const CreateContext& ctx) {
  LOOM_ASSIGN_OR_RETURN(std::vector<std::string> names, domain_names(ctx));
  const std::vector<std::string_view> domains(names.begin(), names.end());
  if (domains.size() > 1) return make_rails(ctx, domains);
  OfiOptions o = options_for(ctx);
  if (domains.size() == 1) point_at(o.fabric, domains[0]);
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
