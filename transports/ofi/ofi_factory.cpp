#include "transports/ofi/ofi_factory.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

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

std::string rails_key(std::uint64_t comm_id, int rank) {
  return fmt::format("loom/{:016x}/ofi/rails/{}", comm_id, rank);
}

// Every rank says how many rails it opened, so that a pair uses the rails both have.
Status publish_rail_count(const CreateContext& ctx, std::size_t rails) {
  const std::string count = std::to_string(rails);
  return ctx.store->set(rails_key(ctx.comm_id, ctx.rank),
                        bootstrap::Bytes(count.begin(), count.end()));
}

OfiRails::PeerRails peer_rail_counts(const CreateContext& ctx) {
  return [store = ctx.store, rank = ctx.rank, comm_id = ctx.comm_id](
             int peer, Deadline deadline) -> Result<std::size_t> {
    auto b = store->get(rails_key(comm_id, peer), deadline);
    if (!b.is_ok())
      return b.status().with_context(
          fmt::format("rank {}: connecting ofi rails to rank {}: its rail count", rank, peer));
    const std::string text(b->begin(), b->end());
    std::size_t n = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (ec != std::errc() || end != text.data() + text.size() || n == 0 || n > kMaxOfiRails)
      return make_error(ErrorCode::Internal,
                        "rank {}: connecting ofi rails to rank {}: it published '{}' rails", rank,
                        peer, text);
    return n;
  };
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
  LOOM_RETURN_IF_ERROR(publish_rail_count(ctx, rails.size()));
  return std::unique_ptr<Transport>(
      std::make_unique<OfiRails>(std::move(rails), ctx.nranks, stripe_min, peer_rail_counts(ctx)));
}

// Every (non-loopback) domain of the provider the data address would use.
Result<std::vector<std::string>> provider_domains(const CreateContext& ctx, std::string_view list) {
  LOOM_ASSIGN_OR_RETURN(ProviderInfo p,
                        probe_provider(fabric_request(*ctx.config, ctx.data_address)));
  std::vector<std::string> all = list_domains(p.provider);
  if (all.empty())
    return make_error(ErrorCode::InvalidUsage,
                      "rank {}: LOOM_OFI_DOMAINS={}: provider {} lists no domain but loopback",
                      ctx.rank, list, p.provider);
  LOOM_LOG_INFO(Net, "rank {}: LOOM_OFI_DOMAINS={}: {} domain(s) of {}: {}", ctx.rank, list,
                all.size(), p.provider, fmt::join(all, ","));
  return all;
}

// LOOM_OFI_DOMAINS=near or near:LIST (or unset on EFA): the candidates (every domain, or LIST)
// nearest this rank.
Result<std::vector<std::string>> nearest_domains(const CreateContext& ctx,
                                                 const std::string& list) {
  const std::string shown = list.empty() ? "near (the default on EFA)" : list;
  std::vector<std::string> candidates;
  if (list.empty() || list == "near") {
    LOOM_ASSIGN_OR_RETURN(candidates, provider_domains(ctx, shown));
  } else {
    candidates = near_list(list);
    if (candidates.empty())
      return make_error(ErrorCode::InvalidUsage,
                        "rank {}: LOOM_OFI_DOMAINS={} lists no domain after near:", ctx.rank, list);
  }
  NicSubset picked{candidates, "no topology to choose by"};
  if (ctx.nearest_nics) picked = ctx.nearest_nics(candidates);
  picked = at_most_rails(std::move(picked), ctx.rank, kMaxOfiRails);
  LOOM_LOG_INFO(Net, "rank {}: LOOM_OFI_DOMAINS={}: {} ({})", ctx.rank, shown,
                fmt::join(picked.names, ","), picked.why);
  return picked.names;
}

// Without LOOM_OFI_DOMAINS, EFA hosts take their nearest devices (a server with several EFA
// devices has them spread over its PCIe switches); socket providers the data address's.
bool efa_by_default(const CreateContext& ctx) {
  const std::string provider = ctx.config->get_string("LOOM_OFI_PROVIDER");
  return provider == "efa" || (provider.empty() && efa_device_present());
}

}  // namespace

std::vector<std::string> near_list(std::string_view setting) {
  constexpr std::string_view kPrefix = "near:";
  std::vector<std::string> out;
  if (setting.substr(0, kPrefix.size()) != kPrefix) return out;
  for (std::string_view d : comma_tokens(setting.substr(kPrefix.size()))) out.emplace_back(d);
  return out;
}

NicSubset at_most_rails(NicSubset picked, int rank, std::size_t max) {
  const std::size_t n = picked.names.size();
  if (n <= max || max == 0) return picked;
  const std::size_t first = (static_cast<std::size_t>(rank) * max) % n;
  std::vector<std::string> window;
  for (std::size_t i = 0; i < max; ++i) window.push_back(picked.names[(first + i) % n]);
  picked.why += fmt::format("; {} of the {} from number {}: at most {} rails", max, n, first, max);
  picked.names = std::move(window);
  return picked;
}

// LOOM_OFI_DOMAINS as names: its list; for "all" every (non-loopback) domain of the provider
// the data address would use; for "near" (or near:LIST) the nearest of those (or of LIST), at
// most kMaxOfiRails; unset, "near" on EFA and the provider's choice (no name) otherwise.
Result<std::vector<std::string>> domain_names(const CreateContext& ctx) {
  const std::string list = ctx.config->get_string("LOOM_OFI_DOMAINS");
  if (list == "all") return provider_domains(ctx, list);
  if (list == "near" || list.rfind("near:", 0) == 0 || (list.empty() && efa_by_default(ctx)))
    return nearest_domains(ctx, list);
  std::vector<std::string> out;
  for (std::string_view d : comma_tokens(list)) out.emplace_back(d);
  return out;
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
  LOOM_RETURN_IF_ERROR(publish_rail_count(ctx, 1));
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
