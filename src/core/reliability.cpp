#include "core/reliability.hpp"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "common/process.hpp"
#include "log/log.hpp"

namespace loom::detail {
namespace {

std::string boot_id() {
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(f, id);
  return id;
}

std::uint64_t mix(std::uint64_t h, std::uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ull;
  return h ^ (h >> 29);
}

// "pid pid_ns boot_id serves_store standby_address hostname", as exchanged at init.
std::string identity_card(bool serves_store, const std::string& standby) {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '?';
  return fmt::format("{} {} {} {} {} {}", ::getpid(), proc::own_pid_namespace(), boot_id(),
                     serves_store ? 1 : 0, standby.empty() ? "-" : standby, host);
}

RankIdentity parse_identity(const bootstrap::Bytes& b, const topo::RankInfo* info,
                            std::string& standby) {
  std::istringstream in(std::string(b.begin(), b.end()));
  RankIdentity id;
  long long pid = 0;
  int serves = 0;
  in >> pid >> id.pid_ns >> id.host_id >> serves >> standby >> id.host;
  id.hostname = id.host;
  if (standby == "-") standby.clear();
  id.serves_store = serves == 1;
  id.pid = static_cast<pid_t>(pid > 0 && pid < (1ll << 31) ? pid : 0);
  if (info != nullptr && !info->hostname.empty()) id.host = info->hostname;
  if (id.host.empty()) id.host = "?";
  return id;
}

// A standby store listener on this rank's data address, bound now and served only if the
// store's host dies (see Reliability::shrink). Invalid when the store is not a TCP one.
net::Fd open_standby(const ReliabilitySetup& s, std::string& address) {
  if (dynamic_cast<bootstrap::TcpStoreClient*>(s.store.get()) == nullptr) return {};
  net::SocketAddress at = s.data_address;
  at.set_port(0);
  auto fd = net::listen_on(at);
  auto bound = fd.is_ok() ? net::bound_address(fd.value().get()) : fd.status();
  if (!bound.is_ok()) {
    LOOM_LOG_WARN(Init,
                  "rank {}: no standby store listener (shrink cannot outlive the store's host): "
                  "{}",
                  s.rank, bound.status().message());
    return {};
  }
  address = bound.value().to_string();
  return std::move(fd).value();
}

// One split's entries: (key, old rank) of each rank of `color`, ordered.
Result<std::vector<int>> split_members(const std::vector<bootstrap::Bytes>& all, int color,
                                       int rank) {
  std::vector<std::pair<long long, int>> members;  // (key, old rank) of my color
  for (std::size_t r = 0; r < all.size(); ++r) {
    std::istringstream in(std::string(all[r].begin(), all[r].end()));
    long long c = 0;
    long long k = 0;
    if (!(in >> c >> k))
      return make_error(ErrorCode::Internal, "rank {}: split: bad entry of rank {}", rank, r);
    if (c == color) members.emplace_back(k, static_cast<int>(r));
  }
  std::sort(members.begin(), members.end());
  std::vector<int> out;
  for (const auto& m : members) out.push_back(m.second);
  return out;
}

int position(const std::vector<int>& members, int rank) {
  return static_cast<int>(std::find(members.begin(), members.end(), rank) - members.begin());
}

}  // namespace

Result<std::unique_ptr<Reliability>> Reliability::start(ReliabilitySetup setup,
                                                        const topo::Topology& topology,
                                                        Deadline deadline,
                                                        const bootstrap::WaitCheck& wait_check) {
  const std::string prefix = fmt::format("loom/{:016x}/", setup.comm_id);
  std::string standby;
  net::Fd standby_fd = open_standby(setup, standby);
  std::string card = identity_card(setup.serves_store, standby);
  LOOM_ASSIGN_OR_RETURN(
      auto cards, bootstrap::store_allgather(
                      *setup.store, prefix + "who", setup.rank, setup.nranks,
                      std::span(reinterpret_cast<const std::uint8_t*>(card.data()), card.size()),
                      deadline, wait_check));
  std::vector<RankIdentity> ids;
  std::vector<std::string> standby_addrs(static_cast<std::size_t>(setup.nranks));
  int store_host = -1;
  for (int r = 0; r < setup.nranks; ++r) {
    auto i = static_cast<std::size_t>(r);
    ids.push_back(parse_identity(cards[i], i < topology.ranks.size() ? &topology.ranks[i] : nullptr,
                                 standby_addrs[i]));
    // The lowest rank whose process serves the store (threads as ranks: the first one).
    if (ids.back().serves_store && store_host < 0) store_host = r;
  }
  std::unique_ptr<Reliability> r(new Reliability(std::move(setup), std::move(standby_fd),
                                                 std::move(standby_addrs), store_host));
  FailureMonitor::Hooks hooks = r->setup_.hooks;
  hooks.progress = [self = r.get(), calls = std::move(hooks.progress)] {
    RankProgress p = calls();
    p.derived = self->derived_done();  // split()/shrink() calls done with this store
    return p;
  };
  r->monitor_ = std::make_unique<FailureMonitor>(r->setup_.store, prefix + "ft/", r->setup_.rank,
                                                 std::move(ids), std::move(hooks), store_host);
  return r;
}

Reliability::Reliability(ReliabilitySetup setup, net::Fd standby,
                         std::vector<std::string> standby_addrs, int store_host)
    : setup_(std::move(setup)),
      standby_(std::move(standby)),
      standby_addrs_(std::move(standby_addrs)),
      store_host_(store_host) {}

Status Reliability::join(Derivation& d, const std::string& where) {
  LOOM_ASSIGN_OR_RETURN(net::SocketAddress addr, net::resolve(where));
  auto client = bootstrap::TcpStoreClient::connect(addr, d.comm_id, d.new_rank,
                                                   Deadline::after(setup_.timeout), setup_.secret);
  if (!client.is_ok())
    return client.status().with_context(
        fmt::format("rank {}: joining the new communicator's store at {}", setup_.rank, where));
  client.value()->set_op_timeout(setup_.timeout);
  d.store = std::shared_ptr<bootstrap::Store>(std::move(client).value());
  return Status::ok();
}

// Survivors that disagree on `out` present different communicator ids and are turned away.
Status Reliability::reroot_for_shrink(Derivation& d, const std::vector<int>& out) {
  const int root = d.members.front();
  const std::string& where = standby_addrs_[static_cast<std::size_t>(root)];
  if (where.empty())
    return make_error(ErrorCode::InvalidUsage,
                      "rank {}: shrink: the store's host (rank {}) is excluded and rank {} has no "
                      "standby store listener",
                      setup_.rank, store_host_, root);
  if (root == setup_.rank) {
    if (!standby_.valid())
      return make_error(ErrorCode::InvalidUsage,
                        "rank {}: shrink: this rank's standby store already serves an earlier "
                        "shrink",
                        setup_.rank);
    LOOM_ASSIGN_OR_RETURN(
        d.server, bootstrap::TcpStoreServer::start_on(std::move(standby_), d.comm_id, setup_.secret,
                                                      setup_.store_options));
  }
  LOOM_LOG_INFO(Init,
                "rank {}: shrink without {}: the store's host (rank {}) is excluded; rank {} "
                "serves the new store at {}",
                setup_.rank, format_rank_ranges(out), store_host_, root, where);
  return join(d, where);
}

Status Reliability::reroot_for_split(Derivation& d, const std::string& key) {
  std::string where;
  if (d.new_rank == 0) {
    net::SocketAddress at = setup_.data_address;
    at.set_port(0);
    LOOM_ASSIGN_OR_RETURN(d.server, bootstrap::TcpStoreServer::start(at, d.comm_id, setup_.secret,
                                                                     setup_.store_options));
    where = d.server->address().to_string();
    LOOM_RETURN_IF_ERROR(setup_.store->set(
        key, {reinterpret_cast<const std::uint8_t*>(where.data()), where.size()}));
  } else {
    LOOM_ASSIGN_OR_RETURN(bootstrap::Bytes b,
                          setup_.store->get(key, Deadline::after(setup_.timeout)));
    where.assign(b.begin(), b.end());
  }
  LOOM_LOG_INFO(Init, "rank {}: split: the group (without the store's host, rank {}) meets at {}",
                setup_.rank, store_host_, where);
  return join(d, where);
}

Result<Derivation> Reliability::split(int color, int key) {
  const std::uint64_t gen = ++derived_;
  const std::string base = fmt::format("loom/{:016x}/split/", setup_.comm_id);
  const std::string prefix = base + std::to_string(gen);
  std::string mine = fmt::format("{} {}", color, key);
  auto all = bootstrap::store_allgather(
      *setup_.store, prefix, setup_.rank, setup_.nranks,
      std::span(reinterpret_cast<const std::uint8_t*>(mine.data()), mine.size()),
      Deadline::after(setup_.timeout));
  // Every rank has posted this split's entries, so every rank has finished the previous split.
  if (all.is_ok() && gen > 1)
    (void)setup_.store->erase_prefix(base + std::to_string(gen - 1) + "/");
  auto derivation = [&]() -> Result<Derivation> {
    LOOM_RETURN_IF_ERROR(all.status());
    Derivation d;
    if (color < 0) return d;
    LOOM_ASSIGN_OR_RETURN(d.members, split_members(*all, color, setup_.rank));
    d.member = true;
    d.new_rank = position(d.members, setup_.rank);
    d.comm_id = mix(mix(mix(setup_.comm_id, gen), static_cast<std::uint64_t>(color)), 0x5);
    LOOM_LOG_INFO(Init, "rank {}: split color {} key {} -> rank {} of {}", setup_.rank, color, key,
                  d.new_rank, d.members.size());
    const bool host_inside =
        std::find(d.members.begin(), d.members.end(), store_host_) != d.members.end();
    if (store_host_ >= 0 && !host_inside)
      LOOM_RETURN_IF_ERROR(reroot_for_split(d, fmt::format("{}/store/{}", prefix, color)));
    return d;
  }();
  return derivation;
}

Result<Derivation> Reliability::shrink(const std::vector<int>& excluded) {
  const int rank = setup_.rank;
  const int nranks = setup_.nranks;
  std::vector<int> out = excluded;
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  for (int r : out)
    if (r < 0 || r >= nranks)
      return make_error(ErrorCode::InvalidArgument, "rank {}: shrink: rank {} is outside [0, {})",
                        rank, r, nranks);
  if (std::binary_search(out.begin(), out.end(), rank))
    return make_error(ErrorCode::InvalidArgument, "rank {}: shrink: this rank is excluded", rank);
  if (static_cast<int>(out.size()) >= nranks)
    return make_error(ErrorCode::InvalidArgument, "shrink: every rank is excluded");
  const std::uint64_t gen = ++derived_;
  Derivation d;
  d.member = true;
  // Ranks that disagree on `excluded` derive different ids and time out instead of mixing.
  d.comm_id = mix(mix(setup_.comm_id, gen), 0x7);
  for (int r : out) d.comm_id = mix(d.comm_id, static_cast<std::uint64_t>(r));
  for (int r = 0; r < nranks; ++r)
    if (!std::binary_search(out.begin(), out.end(), r)) d.members.push_back(r);
  d.new_rank = position(d.members, rank);
  LOOM_LOG_INFO(Init, "rank {}: shrink without ranks {} -> rank {} of {}", rank,
                format_rank_ranges(out), d.new_rank, d.members.size());
  Status st = store_host_ >= 0 && std::binary_search(out.begin(), out.end(), store_host_)
                  ? reroot_for_shrink(d, out)
                  : Status::ok();
  if (!st.is_ok()) return st;
  return d;
}

}  // namespace loom::detail
