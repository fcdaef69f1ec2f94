#include "core/transport_choice.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <optional>

#include "common/strings.hpp"
#include "log/log.hpp"

namespace loom::detail {
namespace {

constexpr std::array kAll = {TransportKind::Shm, TransportKind::Ofi, TransportKind::Tcp};
// Device buffers only: LOOM_TRANSPORTS may name it, but no peer is routed to it.
constexpr std::string_view kCudaIpc = "cuda_ipc";  // to_string(TransportKind::CudaIpc)

Result<TransportKind> parse_kind(std::string_view name) {
  if (auto k = transport::kind_named(name)) return *k;
  return make_error(ErrorCode::InvalidUsage,
                    "LOOM_TRANSPORTS names unknown transport '{}' (known: shm, ofi, tcp, cuda_ipc)",
                    name);
}

bool allows(const std::vector<TransportKind>& list, TransportKind k) {
  return std::find(list.begin(), list.end(), k) != list.end();
}

}  // namespace

Result<std::vector<TransportKind>> parse_transport_list(std::string_view text) {
  std::vector<TransportKind> include, exclude;
  for (std::string_view tok : comma_tokens(text)) {
    bool negate = tok.front() == '^';
    if ((negate ? tok.substr(1) : tok) == kCudaIpc) continue;
    LOOM_ASSIGN_OR_RETURN(TransportKind k, parse_kind(negate ? tok.substr(1) : tok));
    (negate ? exclude : include).push_back(k);
  }
  if (include.empty()) include.assign(kAll.begin(), kAll.end());
  std::vector<TransportKind> out;
  for (TransportKind k : include)
    if (!allows(exclude, k) && !allows(out, k)) out.push_back(k);
  if (out.empty())
    return make_error(ErrorCode::InvalidUsage, "LOOM_TRANSPORTS='{}' excludes every transport",
                      text);
  return out;
}

Result<bool> cuda_ipc_allowed(std::string_view text) {
  LOOM_RETURN_IF_ERROR(parse_transport_list(text).status());
  bool positive = false, named = false, excluded = false;
  for (std::string_view tok : comma_tokens(text)) {
    if (tok.front() == '^') {
      excluded = excluded || tok.substr(1) == kCudaIpc;
      continue;
    }
    positive = true;
    named = named || tok == kCudaIpc;
  }
  return !excluded && (!positive || named);
}

std::string format_transport_list(const std::vector<TransportKind>& kinds) {
  std::string s;
  for (TransportKind k : kinds) {
    if (!s.empty()) s += ',';
    s += to_string(k);
  }
  return s;
}

namespace {

// The transport between two ranks: the first in the lower rank's list that the higher rank's
// list also allows and that can reach the peer; none when they share nothing usable.
std::optional<TransportKind> pair_choice(const std::vector<TransportKind>& lo,
                                         const std::vector<TransportKind>& hi, bool same_host) {
  for (TransportKind k : lo)
    if (allows(hi, k) && (k != TransportKind::Shm || same_host)) return k;
  return std::nullopt;
}

}  // namespace

Result<std::vector<TransportKind>> choose_transports(
    int rank, const std::vector<std::string>& host_ids,
    const std::vector<std::vector<TransportKind>>& allowed) {
  const int n = static_cast<int>(host_ids.size());
  std::vector<TransportKind> out(static_cast<std::size_t>(n), TransportKind::Tcp);
  for (int p = 0; p < n; ++p) {
    if (p == rank) continue;
    const auto& lo = allowed[static_cast<std::size_t>(std::min(rank, p))];
    const auto& hi = allowed[static_cast<std::size_t>(std::max(rank, p))];
    bool same_host =
        host_ids[static_cast<std::size_t>(rank)] == host_ids[static_cast<std::size_t>(p)];
    std::optional<TransportKind> k = pair_choice(lo, hi, same_host);
    if (!k)
      return make_error(ErrorCode::InvalidUsage,
                        "rank {} and rank {} share no usable transport (LOOM_TRANSPORTS: rank {} "
                        "allows {}, rank {} allows {}; shm needs the same host)",
                        rank, p, std::min(rank, p), format_transport_list(lo), std::max(rank, p),
                        format_transport_list(hi));
    out[static_cast<std::size_t>(p)] = *k;
  }
  return out;
}

bool any_pair_uses(TransportKind kind, const std::vector<std::string>& host_ids,
                   const std::vector<std::vector<TransportKind>>& allowed) {
  // Ranks with the same host and list choose alike: compare one member of each such class
  // (rank order within a pair only matters between different lists, so try both orders).
  std::map<std::pair<std::string, std::vector<TransportKind>>, int> members;
  for (std::size_t r = 0; r < host_ids.size(); ++r) ++members[{host_ids[r], allowed[r]}];
  for (auto a = members.begin(); a != members.end(); ++a)
    for (auto b = a; b != members.end(); ++b) {
      if (a == b && a->second < 2) continue;
      const bool same_host = a->first.first == b->first.first;
      const auto& la = a->first.second;
      const auto& lb = b->first.second;
      if (pair_choice(la, lb, same_host) == kind || pair_choice(lb, la, same_host) == kind)
        return true;
    }
  return false;
}

Result<std::vector<TransportKind>> resolve_transport_list(int rank, std::string_view text,
                                                          bool ofi_requested, bool fallback,
                                                          const OfiAvailability& ofi) {
  LOOM_ASSIGN_OR_RETURN(std::vector<TransportKind> list, parse_transport_list(text));
  auto it = std::find(list.begin(), list.end(), TransportKind::Ofi);
  if (it == list.end()) return list;
  if (ofi.available && (ofi_requested || ofi.preferred)) {
    LOOM_LOG_INFO(Net, "rank {}: ofi transport available over libfabric provider {}", rank,
                  ofi.provider);
    return list;
  }
  list.erase(it);
  if (!ofi_requested) {
    LOOM_LOG_INFO(Net, "rank {}: no EFA ({}); peers on other hosts use {}", rank,
                  ofi.available ? "ofi would run over " + ofi.provider : ofi.why_missing,
                  allows(list, TransportKind::Tcp) ? "tcp" : "what LOOM_TRANSPORTS allows");
    if (list.empty()) list.push_back(TransportKind::Tcp);
    return list;
  }
  if (!fallback)
    return make_error(ErrorCode::InvalidUsage,
                      "rank {}: the ofi transport was requested but cannot run: {} (and "
                      "LOOM_OFI_FALLBACK=false forbids falling back to tcp)",
                      rank, ofi.why_missing);
  if (!allows(list, TransportKind::Tcp)) list.push_back(TransportKind::Tcp);
  LOOM_LOG_WARN(Net,
                "rank {}: the ofi transport was requested but cannot run: {}. Falling back: ofi "
                "-> tcp (set LOOM_OFI_FALLBACK=false to make this an error)",
                rank, ofi.why_missing);
  return list;
}

Result<std::string> effective_transports(int rank, const config::Config& cfg,
                                         const net::SocketAddress& data_address) {
  std::string text = cfg.get_string("LOOM_TRANSPORTS");
  LOOM_ASSIGN_OR_RETURN(auto parsed, parse_transport_list(text));
  if (std::find(parsed.begin(), parsed.end(), TransportKind::Ofi) == parsed.end()) return text;
  const auto entries = comma_tokens(text);  // "ofi" among the positive entries?
  const bool named = std::find(entries.begin(), entries.end(), "ofi") != entries.end();
  bool requested = named || !cfg.get_string("LOOM_OFI_PROVIDER").empty();
  // Unrequested ofi runs only on EFA: the probe skips fi_getinfo without an EFA device.
  const OfiAvailability ofi =
      transport::builtin_transports().probe(TransportKind::Ofi, cfg, data_address, requested);
  LOOM_ASSIGN_OR_RETURN(auto list, resolve_transport_list(rank, text, requested,
                                                          cfg.get_bool("LOOM_OFI_FALLBACK"), ofi));
  return format_transport_list(list);
}

}  // namespace loom::detail
