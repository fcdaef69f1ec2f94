#include "core/job_layout.hpp"

#include <algorithm>
#include <cstring>
#include <optional>
#include <span>

#include "core/peer_transports.hpp"
#include "log/log.hpp"

namespace loom::detail {
namespace {

// Whether every rank would choose one transport kind for all its peers, the same kind for every
// rank; only asked where all ranks share the host (the arena's case). When every rank allows
// the same transports, every pair chooses alike: rank 0's choices settle it.
bool one_kind_everywhere(const std::vector<std::string>& hosts,
                         const std::vector<std::vector<TransportKind>>& allowed) {
  const int n = static_cast<int>(hosts.size());
  if (n < 2 ||
      std::any_of(hosts.begin(), hosts.end(), [&](const auto& h) { return h != hosts[0]; }))
    return false;
  const bool same_lists =
      std::all_of(allowed.begin(), allowed.end(), [&](const auto& a) { return a == allowed[0]; });
  std::optional<TransportKind> only;
  for (int r = 0; r < (same_lists ? 1 : n); ++r) {
    auto kinds = choose_transports(r, hosts, allowed);
    if (!kinds.is_ok()) return false;
    for (int p = 0; p < n; ++p) {
      if (p == r) continue;
      const TransportKind k = (*kinds)[static_cast<std::size_t>(p)];
      if (only && *only != k) return false;
      only = k;
    }
  }
  return true;
}

// Card layout: [SocketAddress][u32 allow-list length][allow list][u32 rail count][rail
// SocketAddresses][topology bytes].
std::vector<std::uint8_t> make_card(const net::SocketAddress& addr,
                                    const std::vector<net::SocketAddress>& rails,
                                    const std::string& allow,
                                    const std::vector<std::uint8_t>& topo_bytes) {
  std::vector<std::uint8_t> card;
  auto put = [&card](const void* p, std::size_t n) {
    const auto* b = static_cast<const std::uint8_t*>(p);
    card.insert(card.end(), b, b + n);
  };
  put(&addr, sizeof addr);
  auto len = static_cast<std::uint32_t>(allow.size());
  put(&len, 4);
  put(allow.data(), allow.size());
  auto nrails = static_cast<std::uint32_t>(rails.size());
  put(&nrails, 4);
  for (const net::SocketAddress& r : rails) put(&r, sizeof r);
  card.insert(card.end(), topo_bytes.begin(), topo_bytes.end());
  return card;
}

struct Card {
  net::SocketAddress addr;
  std::vector<net::SocketAddress> rails;
  std::string allow;
  std::pair<topo::RankInfo, topo::HostInfo> topo;
};

// Reads the card's fields in order; false when it ends early.
class CardReader {
 public:
  explicit CardReader(std::span<const std::uint8_t> b) : b_(b) {}
  bool take(void* out, std::size_t n) {
    if (b_.size() - at_ < n) return false;
    std::memcpy(out, b_.data() + at_, n);
    at_ += n;
    return true;
  }
  bool take_string(std::string& out, std::size_t n) {
    if (b_.size() - at_ < n) return false;
    out.assign(reinterpret_cast<const char*>(b_.data() + at_), n);
    at_ += n;
    return true;
  }
  [[nodiscard]] std::span<const std::uint8_t> rest() const { return b_.subspan(at_); }

 private:
  std::span<const std::uint8_t> b_;
  std::size_t at_ = 0;
};

constexpr std::uint32_t kMaxCardRails = 16;

Result<Card> read_card(int rank, int from, const std::vector<std::uint8_t>& b) {
  Card c;
  CardReader in(b);
  std::uint32_t len = 0;
  std::uint32_t nrails = 0;
  bool ok = in.take(&c.addr, sizeof c.addr) && in.take(&len, 4) && in.take_string(c.allow, len) &&
            in.take(&nrails, 4) && nrails <= kMaxCardRails;
  for (std::uint32_t i = 0; ok && i < nrails; ++i) {
    net::SocketAddress r;
    ok = in.take(&r, sizeof r);
    c.rails.push_back(r);
  }
  if (!ok)
    return make_error(ErrorCode::Mismatch, "rank {}: rank {} published a malformed card", rank,
                      from);
  auto t = topo::decode(in.rest());
  if (!t.is_ok())
    return t.status().with_context(fmt::format("rank {}: card of rank {}", rank, from));
  c.topo = std::move(t).value();
  return c;
}

Result<topo::Topology> topology_from(const config::Config& cfg, int rank, int nranks,
                                     std::vector<std::pair<topo::RankInfo, topo::HostInfo>> parts) {
  std::string file = cfg.get_string("LOOM_TOPO_FILE");
  if (file.empty()) {
    topo::Topology t = topo::assemble(std::move(parts));
    LOOM_RETURN_IF_ERROR(topo::validate(t).with_context(fmt::format("rank {}: topology", rank)));
    return t;
  }
  auto t = topo::read_file(file);
  if (!t.is_ok()) return t.status().with_context(fmt::format("rank {}: LOOM_TOPO_FILE", rank));
  if (t->nranks() != nranks)
    return make_error(ErrorCode::InvalidUsage,
                      "rank {}: LOOM_TOPO_FILE {} describes {} ranks, "
                      "the job has {}",
                      rank, file, t->nranks(), nranks);
  return t;
}

void log_choices(int rank, const JobLayout& l) {
  for (int p = 0; p < l.topology.nranks(); ++p)
    if (p != rank)
      LOOM_LOG_INFO(Init, "rank {}: peer {} on {} via {}", rank, p,
                    l.topology.ranks[static_cast<std::size_t>(p)].hostname,
                    to_string(l.transport_of[static_cast<std::size_t>(p)]));
  LOOM_LOG_INFO(Init, "rank {}: ring {}", rank, topo::describe_ring(l.topology, l.ring));
}

}  // namespace

int JobLayout::ranks_on_my_host(int rank) const {
  return static_cast<int>(topology.ranks_on_host(topology.host_of(rank)).size());
}

Result<JobLayout> exchange_layout(bootstrap::Store& store, const std::string& prefix, int rank,
                                  int nranks, const config::Config& cfg,
                                  const net::SocketAddress& tcp_address,
                                  const std::vector<net::SocketAddress>& rails, Deadline deadline,
                                  const bootstrap::WaitCheck& check) {
  LOOM_ASSIGN_OR_RETURN(auto mine, topo::discover_local(rank, cfg));
  LOOM_ASSIGN_OR_RETURN(std::string allow, effective_transports(rank, cfg, tcp_address));
  auto card = make_card(tcp_address, rails, allow, topo::encode(mine.first, mine.second));
  LOOM_ASSIGN_OR_RETURN(auto all, bootstrap::store_allgather(store, prefix + "card", rank, nranks,
                                                             card, deadline, check));
  JobLayout l;
  std::vector<std::pair<topo::RankInfo, topo::HostInfo>> parts;
  std::vector<std::vector<TransportKind>> allowed;
  for (int r = 0; r < nranks; ++r) {
    LOOM_ASSIGN_OR_RETURN(Card c, read_card(rank, r, all[static_cast<std::size_t>(r)]));
    l.tcp_addresses.push_back(c.addr);
    if (!c.rails.empty()) {
      l.rail_addresses.resize(static_cast<std::size_t>(nranks));
      l.rail_addresses[static_cast<std::size_t>(r)] = std::move(c.rails);
    }
    LOOM_ASSIGN_OR_RETURN(auto kinds, parse_transport_list(c.allow));
    allowed.push_back(std::move(kinds));
    parts.push_back(std::move(c.topo));
  }
  LOOM_ASSIGN_OR_RETURN(l.topology, topology_from(cfg, rank, nranks, std::move(parts)));
  std::vector<std::string> hosts;
  for (const auto& ri : l.topology.ranks) hosts.push_back(ri.host_id);
  LOOM_ASSIGN_OR_RETURN(l.transport_of, choose_transports(rank, hosts, allowed));
  l.any_ofi = any_pair_uses(TransportKind::Ofi, hosts, allowed);
  l.one_kind = one_kind_everywhere(hosts, allowed);
  l.ring = topo::ring_order(l.topology);
  std::string dump = cfg.get_string("LOOM_TOPO_DUMP_FILE");
  if (rank == 0 && !dump.empty()) LOOM_RETURN_IF_ERROR(topo::write_file(l.topology, dump));
  log_choices(rank, l);
  return l;
}

std::string rendezvous_name(const std::string& prefix) {
  return prefix + "init";
}

Status finish_rendezvous(bootstrap::Store& store, const std::string& prefix, int rank, int nranks,
                         Deadline deadline, const bootstrap::WaitCheck& check) {
  // No acknowledgement to rank 0 follows: the next collective steps of creation (the arena, the
  // identities' allgather) need every rank past this barrier, so rank 0 (which may host the
  // store's server) cannot finish before every rank has read it.
  return bootstrap::store_barrier(store, rendezvous_name(prefix), rank, nranks, deadline, check);
}

}  // namespace loom::detail
