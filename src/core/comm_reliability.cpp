// CommImpl: failure sharing, abort, status, split and shrink (see docs/reliability.md).
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "core/comm_impl.hpp"
#include "core/comm_setup.hpp"
#include "core/job_layout.hpp"
#include "log/log.hpp"
#include "transports/shm/peer_process.hpp"

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
  return fmt::format("{} {} {} {} {} {}", ::getpid(), transport::shm::own_pid_namespace(),
                     boot_id(), serves_store ? 1 : 0, standby.empty() ? "-" : standby, host);
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

}  // namespace

Status CommImpl::start_monitor(const JobLayout& layout, Deadline deadline) {
  const std::string prefix = fmt::format("loom/{:016x}/", comm_id_);
  // A standby store listener (bound now, served only if the store's host dies; see shrink()).
  std::string standby;
  if (dynamic_cast<bootstrap::TcpStoreClient*>(store_.get()) != nullptr) {
    net::SocketAddress at = data_address_;
    at.set_port(0);
    auto fd = net::listen_on(at);
    auto bound = fd.is_ok() ? net::bound_address(fd.value().get()) : fd.status();
    if (bound.is_ok()) {
      standby_ = std::move(fd).value();
      standby = bound.value().to_string();
    } else {
      LOOM_LOG_WARN(Init,
                    "rank {}: no standby store listener (shrink cannot outlive the store's "
                    "host): {}",
                    rank_, bound.status().message());
    }
  }
  std::string card = identity_card(server_ != nullptr, standby);
  LOOM_ASSIGN_OR_RETURN(
      auto cards, bootstrap::store_allgather(
                      *store_, prefix + "who", rank_, nranks_,
                      std::span(reinterpret_cast<const std::uint8_t*>(card.data()), card.size()),
                      deadline, liveness_));
  std::vector<RankIdentity> ids;
  standby_addrs_.assign(static_cast<std::size_t>(nranks_), "");
  for (int r = 0; r < nranks_; ++r) {
    auto i = static_cast<std::size_t>(r);
    ids.push_back(parse_identity(
        cards[i], i < layout.topology.ranks.size() ? &layout.topology.ranks[i] : nullptr,
        standby_addrs_[i]));
    // The lowest rank whose process serves the store (threads as ranks: the first one).
    if (ids.back().serves_store && store_host_ < 0) store_host_ = r;
  }
  FailureMonitor::Hooks hooks;
  hooks.fail = [this](const Status& why) {
    note_failed_peer(why);
    if (engine_) engine_->abort(why, Clock::duration::zero());
  };
  hooks.progress = [this] { return progress(); };
  hooks.call = [this](std::int64_t seq) {
    return seq < 0 ? std::nullopt : describe_call(static_cast<std::uint64_t>(seq));
  };
  hooks.check_calls_after = settings_.check_calls_after;
  monitor_ = std::make_unique<FailureMonitor>(store_, prefix + "ft/", rank_, std::move(ids),
                                              std::move(hooks), store_host_);
  return Status::ok();
}

// Peers that fail because this rank closes its cuda_ipc FIFOs after a failure are told which
// rank failed first, so every survivor names the cause.
void CommImpl::note_failed_peer(const Status& why) {
  if (direct_ && why.code() == ErrorCode::PeerFailed && why.peer() >= 0 && why.peer() != rank_)
    direct_->transport().note_failure(why.peer());
}

void CommImpl::note_completed(std::uint64_t seq) {
  last_completed_.store(static_cast<std::int64_t>(seq));
  std::lock_guard lk(progress_mu_);
  while (!unfinished_.empty() && unfinished_.front().first <= seq) unfinished_.pop_front();
}

RankProgress CommImpl::progress() const {
  RankProgress p;
  p.submitted = static_cast<std::int64_t>(next_seq_.load()) - 1;
  p.completed = last_completed_.load();
  p.derived = derived_done_.load();
  std::lock_guard lk(progress_mu_);
  if (!unfinished_.empty()) {
    p.current_seq = static_cast<std::int64_t>(unfinished_.front().first);
    p.current = unfinished_.front().second;
  }
  return p;
}

Status CommImpl::name_failed_peer(const Status& why) const {
  return monitor_ ? monitor_->name_peer(why) : why;
}

Status CommImpl::known_failure(int peer) const {
  if (!monitor_) return liveness_ ? liveness_() : Status::ok();  // still being created
  const std::vector<int> failed = monitor_->failed_ranks();
  if (std::find(failed.begin(), failed.end(), peer) == failed.end()) return Status::ok();
  return name_failed_peer(
      Status(ErrorCode::PeerFailed, fmt::format("rank {}: rank {} failed before this rank could "
                                                "connect to it",
                                                rank_, peer))
          .with_peer(peer));
}

void CommImpl::abort() {
  std::lock_guard lk(abort_mu_);
  if (aborted_.exchange(true)) return;
  Status why{ErrorCode::Aborted, fmt::format("rank {}: the communicator was aborted", rank_)};
  if (engine_) engine_->abort(why, std::chrono::milliseconds(800));
  if (monitor_) monitor_->stop_now();
  engine_.reset();
  transports_.reset();
  scratch_.reset();
  scratch_bytes_ = 0;
  LOOM_LOG_INFO(Init, "rank {}: communicator {:016x} aborted", rank_, comm_id_);
}

Status CommImpl::async_error() const {
  std::unique_lock lk(abort_mu_, std::try_to_lock);
  if (!lk.owns_lock() || aborted_.load())  // aborting or aborted
    return {ErrorCode::Aborted, fmt::format("rank {}: the communicator was aborted", rank_)};
  if (engine_) {
    Status st = engine_->failure();
    if (!st.is_ok()) return st;
  }
  return monitor_ ? monitor_->first_failure() : Status::ok();
}

std::vector<int> CommImpl::failed_ranks() const {
  return monitor_ ? monitor_->failed_ranks() : std::vector<int>{};
}

std::string CommImpl::status() const {
  RankProgress p = progress();
  std::string out =
      fmt::format("rank {} of {} (communicator {:016x}): last submitted #{}, last completed #{}",
                  rank_, nranks_, comm_id_, p.submitted, p.completed);
  if (p.current_seq >= 0) out += fmt::format("; in progress: {}", p.current);
  Status err = async_error();
  if (!err.is_ok()) out += fmt::format("; failed: {}: {}", to_string(err.code()), err.message());
  std::vector<int> failed = failed_ranks();
  if (!failed.empty()) out += "; failed ranks: " + format_rank_ranges(failed);
  if (monitor_) {
    std::string report = monitor_->last_report();
    if (!report.empty()) out += "; last timeout: " + report;
  }
  return out;
}

Status CommImpl::members_alive(const std::vector<int>& members) const {
  for (int r : members)
    if (Status st = known_failure(r); !st.is_ok()) return st;
  return Status::ok();
}

Result<std::unique_ptr<CommImpl>> CommImpl::derive(
    std::uint64_t comm_id, int new_rank, const std::vector<int>& members,
    std::shared_ptr<bootstrap::Store> store, std::shared_ptr<bootstrap::TcpStoreServer> server) {
  net::SocketAddress bind = data_address_;
  bind.set_port(0);
  if (!store) {
    store = store_;
    server = server_;
  }
  CommSetup setup;
  setup.rank = new_rank;
  setup.nranks = static_cast<int>(members.size());
  setup.comm_id = comm_id;
  setup.store = std::move(store);
  setup.server = std::move(server);
  setup.bind_address = bind;
  setup.config = config_;
  setup.secret = settings_.tcp.secret;
  setup.liveness = [this, members] { return members_alive(members); };
  return CommImpl::create(std::move(setup));
}

Result<std::unique_ptr<CommImpl>> CommImpl::derive_on(
    std::uint64_t comm_id, int new_rank, const std::vector<int>& members, const std::string& where,
    std::shared_ptr<bootstrap::TcpStoreServer> server) {
  LOOM_ASSIGN_OR_RETURN(net::SocketAddress addr, net::resolve(where));
  auto client = bootstrap::TcpStoreClient::connect(
      addr, comm_id, new_rank, Deadline::after(settings_.timeout), settings_.tcp.secret);
  if (!client.is_ok())
    return client.status().with_context(
        fmt::format("rank {}: joining the new communicator's store at {}", rank_, where));
  client.value()->set_op_timeout(settings_.timeout);
  return derive(comm_id, new_rank, members,
                std::shared_ptr<bootstrap::Store>(std::move(client).value()), std::move(server));
}

// The rank that served the store is excluded (it died): the lowest survivor serves a new store
// on the standby listener it opened at init, and every survivor joins it with the job's secret.
// Survivors that disagree on `out` present different communicator ids and are turned away.
Result<std::unique_ptr<CommImpl>> CommImpl::shrink_rerooted(std::uint64_t comm_id, int new_rank,
                                                            const std::vector<int>& members,
                                                            const std::vector<int>& out) {
  const int root = members.front();
  const std::string& where = standby_addrs_[static_cast<std::size_t>(root)];
  if (where.empty())
    return make_error(ErrorCode::InvalidUsage,
                      "rank {}: shrink: the store's host (rank {}) is excluded and rank {} has no "
                      "standby store listener",
                      rank_, store_host_, root);
  std::shared_ptr<bootstrap::TcpStoreServer> server;
  if (root == rank_) {
    if (!standby_.valid())
      return make_error(ErrorCode::InvalidUsage,
                        "rank {}: shrink: this rank's standby store already serves an earlier "
                        "shrink",
                        rank_);
    LOOM_ASSIGN_OR_RETURN(
        server, bootstrap::TcpStoreServer::start_on(std::move(standby_), comm_id,
                                                    settings_.tcp.secret, store_options(config_)));
  }
  LOOM_LOG_INFO(Init,
                "rank {}: shrink without {}: the store's host (rank {}) is excluded; rank {} "
                "serves the new store at {}",
                rank_, format_rank_ranges(out), store_host_, root, where);
  return derive_on(comm_id, new_rank, members, where, std::move(server));
}

// The group's rank 0 starts a store on a fresh port of its data address and publishes the
// address in this communicator's store; the others read it there and join.
Result<std::unique_ptr<CommImpl>> CommImpl::split_rerooted(std::uint64_t comm_id, int new_rank,
                                                           const std::vector<int>& members,
                                                           const std::string& key) {
  std::shared_ptr<bootstrap::TcpStoreServer> server;
  std::string where;
  if (new_rank == 0) {
    net::SocketAddress at = data_address_;
    at.set_port(0);
    LOOM_ASSIGN_OR_RETURN(server, bootstrap::TcpStoreServer::start(
                                      at, comm_id, settings_.tcp.secret, store_options(config_)));
    where = server->address().to_string();
    LOOM_RETURN_IF_ERROR(
        store_->set(key, {reinterpret_cast<const std::uint8_t*>(where.data()), where.size()}));
  } else {
    LOOM_ASSIGN_OR_RETURN(bootstrap::Bytes b, store_->get(key, Deadline::after(settings_.timeout)));
    where.assign(b.begin(), b.end());
  }
  LOOM_LOG_INFO(Init, "rank {}: split: the group (without the store's host, rank {}) meets at {}",
                rank_, store_host_, where);
  return derive_on(comm_id, new_rank, members, where, std::move(server));
}

namespace {

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

}  // namespace

Result<std::unique_ptr<CommImpl>> CommImpl::split(int color, int key) {
  if (aborted_.load()) return Status{ErrorCode::Aborted, "split on an aborted communicator"};
  const std::uint64_t gen = ++derived_;
  const std::string base = fmt::format("loom/{:016x}/split/", comm_id_);
  const std::string prefix = base + std::to_string(gen);
  std::string mine = fmt::format("{} {}", color, key);
  auto all = bootstrap::store_allgather(
      *store_, prefix, rank_, nranks_,
      std::span(reinterpret_cast<const std::uint8_t*>(mine.data()), mine.size()),
      Deadline::after(settings_.timeout));
  // Every rank has posted this split's entries, so every rank has finished the previous split.
  if (all.is_ok() && gen > 1) (void)store_->erase_prefix(base + std::to_string(gen - 1) + "/");
  auto child = [&]() -> Result<std::unique_ptr<CommImpl>> {
    LOOM_RETURN_IF_ERROR(all.status());
    if (color < 0) return std::unique_ptr<CommImpl>{};
    LOOM_ASSIGN_OR_RETURN(std::vector<int> members, split_members(*all, color, rank_));
    const int new_rank =
        static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
    std::uint64_t id = mix(mix(mix(comm_id_, gen), static_cast<std::uint64_t>(color)), 0x5);
    LOOM_LOG_INFO(Init, "rank {}: split color {} key {} -> rank {} of {}", rank_, color, key,
                  new_rank, members.size());
    const bool host_inside =
        std::find(members.begin(), members.end(), store_host_) != members.end();
    if (store_host_ >= 0 && !host_inside)
      return split_rerooted(id, new_rank, members, fmt::format("{}/store/{}", prefix, color));
    return derive(id, new_rank, members);
  }();
  ++derived_done_;  // done with this store for the split (a child on it holds its own reference)
  return child;
}

Result<std::unique_ptr<CommImpl>> CommImpl::shrink(const std::vector<int>& excluded) {
  std::vector<int> out = excluded;
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  for (int r : out)
    if (r < 0 || r >= nranks_)
      return make_error(ErrorCode::InvalidArgument, "rank {}: shrink: rank {} is outside [0, {})",
                        rank_, r, nranks_);
  if (std::binary_search(out.begin(), out.end(), rank_))
    return make_error(ErrorCode::InvalidArgument, "rank {}: shrink: this rank is excluded", rank_);
  if (static_cast<int>(out.size()) >= nranks_)
    return make_error(ErrorCode::InvalidArgument, "shrink: every rank is excluded");
  const std::uint64_t gen = ++derived_;
  // Ranks that disagree on `excluded` derive different ids and time out instead of mixing.
  std::uint64_t id = mix(mix(comm_id_, gen), 0x7);
  for (int r : out) id = mix(id, static_cast<std::uint64_t>(r));
  std::vector<int> members;
  for (int r = 0; r < nranks_; ++r)
    if (!std::binary_search(out.begin(), out.end(), r)) members.push_back(r);
  int new_rank =
      static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
  LOOM_LOG_INFO(Init, "rank {}: shrink without ranks {} -> rank {} of {}", rank_,
                format_rank_ranges(out), new_rank, members.size());
  auto child = store_host_ >= 0 && std::binary_search(out.begin(), out.end(), store_host_)
                   ? shrink_rerooted(id, new_rank, members, out)
                   : derive(id, new_rank, members);
  ++derived_done_;
  return child;
}

}  // namespace loom::detail
