// CommImpl: failure sharing, abort, status, split and shrink (see docs/reliability.md); the
// failure monitor and the derived communicators' stores are Reliability's (reliability.hpp).
#include <algorithm>

#include "core/comm_impl.hpp"
#include "core/comm_setup.hpp"
#include "core/flight_record.hpp"
#include "log/log.hpp"

namespace loom::detail {

// Peers that fail because this rank closes its cuda_ipc FIFOs after a failure are told which
// rank failed first, so every survivor names the cause.
void CommImpl::note_failed_peer(const Status& why) {
  if (direct_ && why.code() == ErrorCode::PeerFailed && why.peer() >= 0 && why.peer() != rank_)
    direct_->transport().note_failure(why.peer());
}

void CommImpl::note_started(std::uint64_t seq) {
  calls_.started(seq);
}

void CommImpl::note_completed(std::uint64_t seq) {
  calls_.completed(seq);
}

void CommImpl::note_submitted(const coll::OpDesc& op, const char* algorithm,
                              Clock::time_point submitted) {
  calls_.submitted(op, algorithm, submitted);
}

void CommImpl::note_ran(const coll::OpDesc& op, const char* algorithm,
                        Clock::time_point submitted) {
  calls_.ran(op, algorithm, submitted);
}

void CommImpl::note_p2p_started(const coll::OpDesc& op) {
  calls_.p2p_started(op);
}

void CommImpl::note_p2p_completed(const coll::OpDesc& op) {
  calls_.p2p_completed(op.p2p.record);
}

RankProgress CommImpl::progress() const {
  RankProgress p = calls_.progress();
  p.derived = reliability_ ? reliability_->derived_done() : 0;
  return p;
}

Status CommImpl::name_failed_peer(const Status& why) const {
  return reliability_ ? reliability_->monitor().name_peer(why) : why;
}

Status CommImpl::known_failure(int peer) const {
  if (!reliability_) return liveness_ ? liveness_() : Status::ok();  // still being created
  const std::vector<int> failed = reliability_->monitor().failed_ranks();
  const auto it = peer < 0 ? failed.begin() : std::find(failed.begin(), failed.end(), peer);
  if (it == failed.end()) return Status::ok();
  peer = *it;
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
  if (reliability_) reliability_->monitor().stop_now();
  engine_.reset();
  arena_.reset();
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
  return reliability_ ? reliability_->monitor().first_failure() : Status::ok();
}

std::vector<int> CommImpl::failed_ranks() const {
  return reliability_ ? reliability_->monitor().failed_ranks() : std::vector<int>{};
}

std::string CommImpl::flight_record(std::string_view reason, const std::string& status) const {
  FlightHeader header{comm_id_, rank_, nranks_, std::string(reason), status};
  return flight_record_json(header, calls_.recent(), calls_.recent_p2p());
}

void CommImpl::write_flight_record(std::string_view reason, const std::string& status) const {
  if (settings_.flight_dir.empty()) return;
  FlightHeader header{comm_id_, rank_, nranks_, std::string(reason), status};
  Status st =
      detail::write_flight_record(settings_.flight_dir, header,
                                  flight_record_json(header, calls_.recent(), calls_.recent_p2p()));
  if (!st.is_ok())
    LOOM_LOG_WARN(Init, "{}", st.message());
  else
    LOOM_LOG_INFO(Init, "rank {}: flight record ({}) written to {}", rank_, reason,
                  flight_file_path(settings_.flight_dir, comm_id_, rank_));
}

std::string CommImpl::status() const {
  RankProgress p = progress();
  std::string out =
      fmt::format("rank {} of {} (communicator {:016x}): last submitted #{}, last completed #{}",
                  rank_, nranks_, comm_id_, p.submitted, p.completed);
  if (p.current_seq >= 0) out += fmt::format("; in progress: {}", p.current);
  if (auto p2p = calls_.unfinished_p2p()) out += "; sends and receives unfinished: " + *p2p;
  Status err = async_error();
  if (!err.is_ok()) out += fmt::format("; failed: {}: {}", to_string(err.code()), err.message());
  std::vector<int> failed = failed_ranks();
  if (!failed.empty()) out += "; failed ranks: " + format_rank_ranges(failed);
  if (reliability_) {
    std::string report = reliability_->monitor().last_report();
    if (!report.empty()) out += "; last timeout: " + report;
  }
  return out;
}

Status CommImpl::members_alive(const std::vector<int>& members) const {
  for (int r : members)
    if (Status st = known_failure(r); !st.is_ok()) return st;
  return Status::ok();
}

Result<std::unique_ptr<CommImpl>> CommImpl::derive(Derivation d) {
  net::SocketAddress bind = data_address_;
  bind.set_port(0);
  CommSetup setup;
  setup.rank = d.new_rank;
  setup.nranks = static_cast<int>(d.members.size());
  setup.comm_id = d.comm_id;
  // A re-rooted communicator has its own store, served here only if d.server says so; else it
  // shares this one's store and server.
  const bool rerooted = d.store != nullptr;
  setup.store = rerooted ? std::move(d.store) : store_;
  setup.server = rerooted ? std::move(d.server) : server_;
  setup.bind_address = bind;
  setup.config = config_;
  setup.secret = secret_;
  setup.liveness = [this, members = d.members] { return members_alive(members); };
  return CommImpl::create(std::move(setup));
}

Result<std::unique_ptr<CommImpl>> CommImpl::split(int color, int key) {
  if (aborted_.load()) return Status{ErrorCode::Aborted, "split on an aborted communicator"};
  // Every rank takes part in a split: after a failure it could only wait for the failed ones.
  Status failed = engine_->failure();
  if (failed.is_ok()) failed = reliability_->monitor().first_failure();
  if (!failed.is_ok())
    return Status(
               failed.code(),
               fmt::format("rank {}: split({}, {}): the communicator failed earlier, and a split "
                           "needs every rank (shrink() makes one without the failed ranks): {}",
                           rank_, color, key, failed.message()))
        .with_peer(failed.peer());
  Result<Derivation> d = reliability_->split(color, key);
  Result<std::unique_ptr<CommImpl>> child = std::unique_ptr<CommImpl>{};  // not a member
  if (!d.is_ok())
    child = d.status();
  else if (d->member)
    child = derive(std::move(d).value());
  reliability_->finished_deriving();  // a child on this store holds its own reference
  return child;
}

Result<std::unique_ptr<CommImpl>> CommImpl::shrink(const std::vector<int>& excluded) {
  Result<Derivation> d = reliability_->shrink(excluded);
  // A refused call (bad ranks) touched nothing; any other failure counts as a shrink done.
  if (!d.is_ok() && d.status().code() == ErrorCode::InvalidArgument) return d.status();
  if (!d.is_ok()) {
    reliability_->finished_deriving();
    return d.status();
  }
  auto child = derive(std::move(d).value());
  reliability_->finished_deriving();
  return child;
}

}  // namespace loom::detail
