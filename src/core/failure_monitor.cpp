#include "core/failure_monitor.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <random>

#include "common/process.hpp"
#include "log/log.hpp"

namespace loom::detail {
namespace {

using bootstrap::as_bytes;
using bootstrap::as_text;

using std::chrono::milliseconds;

constexpr milliseconds kPollInterval{100};  // monitor loop period (local failures wake it at once)
constexpr milliseconds kReportWait{2000};   // how long a hang report waits for answers
// How long one watch lasts before it is renewed: the steady load a rank puts on the store.
constexpr milliseconds kWatchPeriod{5000};
constexpr milliseconds kLinkTimeout{10000};  // connecting the watcher's link
constexpr milliseconds kWakeWait{500};       // stop(): setting the wake key
constexpr std::size_t kWatchedPeers = 4;     // local peers whose process each rank watches

}  // namespace

struct FailureMonitor::Watched {
  int rank = -1;
  proc::PeerProcess process;
  bool reported = false;
};

FailureMonitor::FailureMonitor(std::shared_ptr<bootstrap::Store> store, std::string prefix,
                               int rank, std::vector<RankIdentity> ranks, Hooks hooks,
                               int store_host)
    : store_(std::move(store)),
      prefix_(std::move(prefix)),
      rank_(rank),
      nranks_(static_cast<int>(ranks.size())),
      ranks_(std::move(ranks)),
      hooks_(std::move(hooks)),
      store_host_(store_host) {
  const RankIdentity& me = ranks_[static_cast<std::size_t>(rank_)];
  for (int i = 1; i < nranks_ && watched_.size() < kWatchedPeers; ++i) {
    const int r = (rank_ + i) % nranks_;  // the next ranks on this host, cyclically
    const RankIdentity& id = ranks_[static_cast<std::size_t>(r)];
    if (id.host_id != me.host_id || id.pid == ::getpid()) continue;
    auto w = std::make_unique<Watched>();
    w->rank = r;
    w->process = proc::PeerProcess::watch(id.pid, id.pid_ns);
    watched_.push_back(std::move(w));
  }
  // Spread over min(1 s, 8 ms per rank), at random so that no rank always asks first.
  const auto spread = std::min<std::int64_t>(1000, 8 * static_cast<std::int64_t>(nranks_));
  ask_delay_ = milliseconds(std::random_device{}() % static_cast<std::uint64_t>(spread + 1));
  auto link = store_->watch_link(Deadline::after(kLinkTimeout));
  if (!link.is_ok())
    LOOM_LOG_INFO(Bootstrap, "rank {}: no second store connection ({}): polling the store", rank_,
                  link.status().message());
  else if (*link) {
    link_ = std::move(link).value();
    watching_ = true;
    watcher_ = std::thread([this] { watch_store(); });
  }
  thread_ = std::thread([this] { loop(); });
}

void FailureMonitor::watch_store() {
  std::int64_t record = 1;
  std::int64_t request = 1;
  std::int64_t gone = 1;
  const std::string wake = prefix_ + "wake/" + std::to_string(rank_);
  for (;;) {
    {
      std::lock_guard lk(mu_);
      if (stop_) break;
    }
    auto hit = link_->watch(
        {prefix_ + "failure/" + std::to_string(record),
         prefix_ + "status/req/" + std::to_string(request), bootstrap::gone_key(gone), wake},
        Deadline::after(kWatchPeriod));
    if (!hit.is_ok() && hit.status().code() == ErrorCode::Timeout) continue;
    if (!hit.is_ok()) {  // the link broke: the loop polls (and finds out about the store)
      LOOM_LOG_DEBUG(Bootstrap, "rank {}: the store watch ended: {}", rank_,
                     hit.status().message());
      watching_ = false;
      break;
    }
    if (*hit == 3) break;
    (*hit == 0 ? record : *hit == 1 ? request : gone) += 1;
    std::lock_guard lk(mu_);
    store_changed_ = true;
    cv_.notify_all();
  }
  std::lock_guard lk(mu_);
  store_changed_ = true;
  cv_.notify_all();
}

// Ends the watcher's parked watch: its wake key, or (a store that does not answer) its link.
void FailureMonitor::wake_watcher() {
  if (!watcher_.joinable()) return;
  const std::uint8_t one[] = {'1'};
  if (!store_->set_by(prefix_ + "wake/" + std::to_string(rank_), one, Deadline::after(kWakeWait))
           .is_ok())
    link_->interrupt();
  watcher_.join();
}

FailureMonitor::~FailureMonitor() {
  stop();
}

void FailureMonitor::stop() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  wake_watcher();
}

void FailureMonitor::stop_now() {
  {
    std::lock_guard lk(mu_);
    stop_ = stop_now_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  wake_watcher();
}

bool FailureMonitor::has_work() const {
  std::lock_guard lk(mu_);
  return !queue_.empty() || stop_now_;
}

bool FailureMonitor::stopping() const {
  std::lock_guard lk(mu_);
  return stop_now_;
}

Status FailureMonitor::local_failure(const Status& failure) {
  Status why = failure;
  // An operation waiting on the store (a lazy connection handshake) saw it vanish: that is the
  // death of the rank that served it.
  if (why.code() == ErrorCode::PeerFailed && why.peer() < 0 && store_host_ >= 0 &&
      store_host_ != rank_ && store_->server_lost())
    why = Status(why.code(), fmt::format("{} [the store was served by {}]", why.message(),
                                         identify(store_host_)))
              .with_peer(store_host_);
  Status st = name_peer(why);
  bool peer_failed = why.code() == ErrorCode::PeerFailed && why.peer() >= 0 &&
                     why.peer() < nranks_ && why.peer() != rank_;
  {
    std::lock_guard lk(mu_);
    // The peer may have gone down because another rank failed before: say so when that is known.
    if (peer_failed && first_.code() == ErrorCode::PeerFailed && first_.peer() >= 0 &&
        first_.peer() != why.peer())
      st = Status(st.code(), fmt::format("{} [after {}]", st.message(), first_.message()))
               .with_peer(why.peer());
    if (peer_failed) failed_.insert(why.peer());  // visible before the operation completes
    if (stop_) return st;
    queue_.push_back(st);
  }
  cv_.notify_all();
  return st;
}

Status FailureMonitor::name_peer(const Status& why) const {
  if (why.code() != ErrorCode::PeerFailed || why.peer() < 0 || why.peer() >= nranks_ ||
      why.peer() == rank_ || why.message().find("(host ") != std::string::npos ||
      why.message().find(" runs on host ") != std::string::npos)
    return why;
  const RankIdentity& id = ranks_[static_cast<std::size_t>(why.peer())];
  return Status(why.code(), fmt::format("{} [rank {} runs on host {}, pid {}]", why.message(),
                                        why.peer(), id.host, id.pid))
      .with_peer(why.peer());
}

std::vector<int> FailureMonitor::failed_ranks() const {
  std::lock_guard lk(mu_);
  return {failed_.begin(), failed_.end()};
}

std::optional<Status> FailureMonitor::mismatch_cause(Deadline until) {
  std::unique_lock lk(mu_);
  const std::uint64_t need = looks_started_ + 1;  // the next look starts after this call
  look_now_ = true;
  cv_.notify_all();
  while (!mismatch_) {
    if (looks_ended_ >= need || stop_ || stop_now_ || until.expired()) return std::nullopt;
    cv_.wait_for(lk, until.left(kPollInterval));
  }
  return mismatch_;
}

Status FailureMonitor::first_failure() const {
  if (!has_first_.load(std::memory_order_acquire)) return Status::ok();  // every call asks
  std::lock_guard lk(mu_);
  return first_;
}

std::string FailureMonitor::last_report() const {
  std::lock_guard lk(mu_);
  return report_;
}

std::string FailureMonitor::identify(int rank) const {
  if (rank < 0 || rank >= nranks_) return fmt::format("rank {}", rank);
  const RankIdentity& id = ranks_[static_cast<std::size_t>(rank)];
  return fmt::format("rank {} (host {}, pid {})", rank, id.host, id.pid);
}

void FailureMonitor::loop() {
  for (;;) {
    std::deque<Status> work;
    bool look_at_store = false;
    {
      std::unique_lock lk(mu_);
      if (stop_now_) return;
      ++looks_started_;
      work.swap(queue_);
      if (stop_ && work.empty()) return;
      // With a watcher, the store is looked at only when it saw a change (or when asked).
      look_at_store = !watching_ || store_changed_.exchange(false) || look_now_;
    }
    for (const Status& s : work) handle_local(s);
    // The routine looks, each skipped when this rank's own failure arrives meanwhile: a store
    // that stopped answering makes each of them slow, and the failure's report comes first.
    for (auto look : {&FailureMonitor::check_local_peers, &FailureMonitor::poll_store,
                      &FailureMonitor::answer_status_requests, &FailureMonitor::check_calls,
                      &FailureMonitor::check_gone}) {
      if (has_work()) break;
      if (look != &FailureMonitor::check_local_peers && store_broken_) break;
      if (!look_at_store && look != &FailureMonitor::check_local_peers &&
          look != &FailureMonitor::check_calls)
        continue;
      (this->*look)();
    }
    // Sleep here, not in a waiting store get: the store connection is shared with the
    // communicator's own setup traffic (lazy shm/tcp handshakes), which a 100 ms get would stall.
    std::unique_lock lk(mu_);
    looks_ended_ = looks_started_;
    cv_.notify_all();  // departure_cause() waits for a look
    cv_.wait_for(lk, kPollInterval,
                 [&] { return stop_ || !queue_.empty() || look_now_ || store_changed_; });
    look_now_ = false;
  }
}

// Applies every failure record available now (one store round trip when there is none).
void FailureMonitor::poll_store() {
  const milliseconds wait{0};
  for (;;) {
    auto got =
        store_->get(prefix_ + "failure/" + std::to_string(next_record_), Deadline::after(wait));
    if (!got.is_ok()) {
      if (got.status().code() != ErrorCode::Timeout) store_gone(got.status());
      return;
    }
    ++next_record_;
    auto rec = decode_failure(as_text(*got), nranks_);
    if (!rec) {
      LOOM_LOG_WARN(Bootstrap, "rank {}: ignoring a malformed failure record", rank_);
      continue;
    }
    apply(*rec);
  }
}

void FailureMonitor::check_local_peers() {
  for (auto& w : watched_) {
    if (w->reported || w->process.alive()) continue;
    w->reported = true;
    if (!store_broken_) {
      const std::optional<bool> left = has_left(w->rank, kStoreGrace);
      if (left == true) continue;     // destroyed its communicator, then exited: not a failure
      if (!left && !store_broken_) {  // no answer: no evidence either way; look again next time
        w->reported = false;
        continue;
      }
    }
    // The peer may have gone down because another rank failed first, and said so before it
    // exited: the records already posted come first, so the first failure names that rank.
    if (!store_broken_) poll_store();
    if (store_broken_) {
      if (w->rank == store_host_ && store_->server_lost()) continue;  // reported by store_gone
      // Without the store a clean exit (the job ending: rank 0's store goes first) cannot be
      // told from a crash; an operation in flight with that peer still fails on its transport.
      LOOM_LOG_INFO(Bootstrap, "rank {}: {} exited after the rendezvous store went away", rank_,
                    identify(w->rank));
      continue;
    }
    FailureRecord r{ErrorCode::PeerFailed, w->rank, rank_,
                    fmt::format("process {} exited", w->process.pid())};
    apply(r);
    post(r);
  }
}

// The store connection ended. A clean shutdown (its owner finalized) only stops failure sharing;
// a store that vanished without one means the rank hosting it died: that is a peer failure,
// and the only prompt way ranks that share no connection with it learn of it.
void FailureMonitor::store_gone(const Status& why) {
  if (store_broken_) return;
  store_broken_ = true;
  if (!store_->server_lost()) {
    LOOM_LOG_DEBUG(Bootstrap, "rank {}: failure sharing stopped, the store shut down: {}", rank_,
                   why.message());
    return;
  }
  if (store_host_ < 0 || store_host_ == rank_) {
    LOOM_LOG_WARN(Bootstrap, "rank {}: failure sharing stopped, the store is gone: {}", rank_,
                  why.message());
    return;
  }
  apply(FailureRecord{ErrorCode::PeerFailed, store_host_, rank_,
                      fmt::format("the rendezvous store it served went away: {}", why.message())});
}

// A record another rank posted that this rank can check and finds false: "rank R's process
// exited" while R runs on this host and its process is alive.
bool FailureMonitor::refuted(const FailureRecord& r) const {
  if (r.code != ErrorCode::PeerFailed || r.reporter == rank_ || r.rank == rank_) return false;
  if (!r.message.starts_with("process ") || !r.message.ends_with(" exited")) return false;
  for (const auto& w : watched_)
    if (w->rank == r.rank && w->process.alive()) return true;
  return false;
}

void FailureMonitor::apply(const FailureRecord& r) {
  if (refuted(r)) {
    LOOM_LOG_WARN(Coll,
                  "rank {}: ignoring rank {}'s report that {} failed ({}): its process runs on "
                  "this host",
                  rank_, r.reporter, identify(r.rank), r.message);
    return;
  }
  Status st;
  {
    std::lock_guard lk(mu_);
    if (r.code == ErrorCode::PeerFailed && r.rank != rank_) failed_.insert(r.rank);
    std::string by = r.reporter == rank_ ? "detected by this rank"
                                         : fmt::format("reported by rank {}", r.reporter);
    if (r.code == ErrorCode::Mismatch && r.reporter != rank_ && !mismatch_) {
      mismatch_ = make_error(ErrorCode::Mismatch, "rank {}: mismatched calls ({}): {}", rank_, by,
                             r.message)
                      .with_peer(r.rank == rank_ ? r.reporter : r.rank);
      cv_.notify_all();
    }
    if (!first_.is_ok()) return;
    if (r.code == ErrorCode::Mismatch)
      st = make_error(ErrorCode::Mismatch, "rank {}: mismatched collective calls ({}): {}", rank_,
                      by, r.message);
    else if (r.rank == rank_)
      st =
          make_error(ErrorCode::PeerFailed, "rank {}: rank {} lost its connection to this rank: {}",
                     rank_, r.reporter, r.message);
    else
      st = make_error(ErrorCode::PeerFailed, "rank {}: peer {} failed ({}; {})", rank_,
                      identify(r.rank), r.message, by);
    if (r.rank != rank_) st = st.with_peer(r.rank);
    first_ = st;
    has_first_.store(!first_.is_ok(), std::memory_order_release);
  }
  LOOM_LOG_ERROR(Coll, "{}", st.message());
  hooks_.fail(st);
}

void FailureMonitor::post(const FailureRecord& r) {
  if (store_broken_) return;
  auto n = store_->add(prefix_ + "failure/count", 1);
  Status st = n.is_ok() ? store_->set(prefix_ + "failure/" + std::to_string(*n),
                                      as_bytes(encode_failure(r)))
                        : n.status();
  if (!st.is_ok())
    LOOM_LOG_WARN(Bootstrap, "rank {}: could not share the failure of rank {}: {}", rank_, r.rank,
                  st.message());
}

void FailureMonitor::handle_local(const Status& why) {
  // A peer may have closed its connection because it failed first for another reason: take
  // what the others already said before blaming the peer.
  if (why.code() == ErrorCode::PeerFailed && !store_broken_) poll_store();
  {
    std::lock_guard lk(mu_);
    if (!first_.is_ok()) return;
    first_ = why;
    has_first_.store(!first_.is_ok(), std::memory_order_release);
    if (why.code() == ErrorCode::PeerFailed && why.peer() >= 0) failed_.insert(why.peer());
  }
  if ((why.code() == ErrorCode::PeerFailed || why.code() == ErrorCode::Mismatch) &&
      why.peer() >= 0 && why.peer() != rank_)
    post(FailureRecord{why.code(), why.peer(), rank_, why.message()});
  if (why.code() == ErrorCode::Timeout) attribute_hang(why);
}

// Answers other ranks' status requests with this rank's progress.
void FailureMonitor::answer_status_requests() {
  for (;;) {
    auto got = store_->get(prefix_ + "status/req/" + std::to_string(next_request_),
                           Deadline::after(milliseconds(0)));
    if (!got.is_ok()) return;
    if (take_call_check_request(as_text(*got))) {  // answered by check_calls()
      ++next_request_;
      continue;
    }
    RankProgress p = hooks_.progress();
    (void)store_->set(fmt::format("{}status/{}/{}", prefix_, next_request_, rank_),
                      as_bytes(encode_progress(p)));
    std::string asker(as_text(*got));
    if (asker != std::to_string(rank_) && !asker.starts_with("q"))  // q: a quiet request
      LOOM_LOG_WARN(Coll,
                    "rank {}: rank {} timed out and asked for this rank's progress: last "
                    "submitted #{}, last completed #{}",
                    rank_, asker, p.submitted, p.completed);
    ++next_request_;
  }
}

// Asks every rank which operation it has reached and logs one report naming the laggards.
void FailureMonitor::attribute_hang(const Status& why) {
  RankProgress mine = hooks_.progress();
  std::int64_t seq = mine.current_seq >= 0 ? mine.current_seq : mine.completed + 1;
  std::string what = mine.current.empty() ? fmt::format("operation #{}", seq) : mine.current;
  std::vector<std::optional<RankProgress>> answers(static_cast<std::size_t>(nranks_));
  answers[static_cast<std::size_t>(rank_)] = mine;
  const bool answered = store_broken_ || gather_progress(answers, Deadline::after(kReportWait));
  std::string report = hang_report(seq, what, answers, ranks_);
  if (!answered)  // a stopped store: every rank would look silent, which says nothing
    report = fmt::format(
        "{} timed out; the rendezvous store{} did not answer within {} ms, so the other ranks' "
        "progress is unknown (is its process stopped or overloaded?)",
        what, store_host_ >= 0 ? " (served by " + identify(store_host_) + ")" : "",
        kReportWait.count());
  LOOM_LOG_ERROR(Coll, "rank {}: {}", rank_, report);
  LOOM_LOG_DEBUG(Coll, "rank {}: the timeout was: {}", rank_, why.message());
  std::lock_guard lk(mu_);
  report_ = report;
}

// Posts a status request and polls for the answers until `until`, answering other ranks'
// requests meanwhile (ranks that time out together each wait for the others' answers). False
// when the store itself stopped answering.
bool FailureMonitor::gather_progress(std::vector<std::optional<RankProgress>>& answers,
                                     Deadline until) {
  constexpr milliseconds kSlow{500};  // a 5 ms get that takes this long: the store is silent
  auto n = store_->add_by(prefix_ + "status/count", 1, until);
  if (!n.is_ok()) return n.status().code() != ErrorCode::Timeout;
  Status posted = store_->set_by(fmt::format("{}status/req/{}", prefix_, *n),
                                 as_bytes(std::to_string(rank_)), until);
  if (!posted.is_ok()) return posted.code() != ErrorCode::Timeout;
  int missing = nranks_ - 1;
  while (missing > 0 && !until.expired() && !stopping()) {
    answer_status_requests();
    for (int r = 0; r < nranks_ && !until.expired(); ++r) {
      auto i = static_cast<std::size_t>(r);
      if (r == rank_ || answers[i]) continue;
      const auto asked = Clock::now();
      auto got = store_->get(fmt::format("{}status/{}/{}", prefix_, *n, r),
                             Deadline::after(milliseconds(5)));
      if (!got.is_ok()) {
        if (Clock::now() - asked > kSlow) return false;
        continue;
      }
      answers[i] = decode_progress(as_text(*got));
      if (!answers[i]) answers[i] = RankProgress{};  // garbage: count as answered
      --missing;
    }
  }
  return true;
}

}  // namespace loom::detail
