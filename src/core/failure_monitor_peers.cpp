// FailureMonitor: what the store knows of the other ranks' processes (clients that vanished
// without a goodbye), leaving a communicator, and the store host's wait for its peers.
#include <algorithm>

#include "core/failure_monitor.hpp"
#include "log/log.hpp"

namespace loom::detail {
namespace {

using bootstrap::as_bytes;
using bootstrap::as_text;

using std::chrono::milliseconds;

// wait_for_peers: one parked read per slice (kPeerPoll without a connection of its own), and a
// status request every kAskEvery slices (the first after kAskEvery - 1), its answers read in the
// next.
constexpr milliseconds kPeerSlice{250};
constexpr milliseconds kPeerPoll{50};
constexpr int kAskEvery = 4;
constexpr milliseconds kLinkWait{2000};
constexpr const char* kOthersLeft = "left/others";  // set by the next-to-last to count out
constexpr milliseconds kAnswerWait{0};
constexpr milliseconds kLookWait{1000};  // wait_for_peers' look at a left marker
// A store read whose answer decides whether a rank failed waits for the store as long as a
// watch does past its end: a slow store is not evidence of anything.
constexpr milliseconds kGoneWait = kStoreGrace;

}  // namespace

int FailureMonitor::rank_of(std::uint32_t pid, const std::string& host) const {
  for (int r = 0; r < nranks_; ++r) {
    const RankIdentity& id = ranks_[static_cast<std::size_t>(r)];
    if (static_cast<std::uint32_t>(id.pid) == pid && (id.hostname == host || id.host == host))
      return r;
  }
  return -1;
}

std::optional<bool> FailureMonitor::has_left(int r, milliseconds grace) {
  auto got = store_->peek(prefix_ + "left/" + std::to_string(r), Deadline::after(grace));
  if (got.is_ok()) return got->has_value();
  if (got.status().code() != ErrorCode::Timeout) store_gone(got.status());
  return std::nullopt;
}

// A rank whose store connection ended without a goodbye has died (or lost its network): the
// store's server saw it, so every rank learns of it within one poll, whichever host it ran on.
void FailureMonitor::check_gone() {
  auto gone = store_->gone(Deadline::after(kGoneWait));
  if (!gone.is_ok()) {
    if (gone.status().code() == ErrorCode::PeerFailed) store_gone(gone.status());
    return;
  }
  for (const bootstrap::GoneClient& g : *gone) {
    const int r = rank_of(g.pid, g.host);
    if (r < 0 || r == rank_ || !gone_seen_.insert(r).second) continue;
    const std::optional<bool> left = has_left(r, kStoreGrace);
    if (!left) {  // a slow store is no evidence: ask again at the next look
      gone_seen_.erase(r);
      store_changed_ = true;
      return;
    }
    if (*left) continue;  // destroyed its communicator first: not a failure
    poll_store();         // what the others said first comes first
    apply(FailureRecord{
        ErrorCode::PeerFailed, r, rank_,
        fmt::format("its connection to the rendezvous store closed without a goodbye (process {} "
                    "on {} died, or its network went down)",
                    g.pid, g.host)});
  }
}

std::int64_t FailureMonitor::request_status(bool quiet) {
  auto n = store_->add(prefix_ + "status/count", 1);
  if (!n.is_ok()) return -1;
  const std::string asker = fmt::format("{}{}", quiet ? "q" : "", rank_);
  if (!store_->set(fmt::format("{}status/req/{}", prefix_, *n), as_bytes(asker)).is_ok()) return -1;
  return *n;
}

std::optional<RankProgress> FailureMonitor::status_answer(std::int64_t n, int r,
                                                          milliseconds wait) {
  auto got = store_->get(fmt::format("{}status/{}/{}", prefix_, n, r), Deadline::after(wait));
  if (!got.is_ok()) return std::nullopt;
  auto p = decode_progress(as_text(*got));
  return p ? p : RankProgress{};  // garbage: counts as answered, with no progress
}

// One parked read per slice (of the key the last other rank to leave sets) ends the wait at
// once when they all left; a status round each second finds the ranks that have finished this
// rank's work but not left. Each slice also drops the ranks known to have failed or whose
// processes no longer talk to the store (both known here, without asking the store).
std::vector<int> FailureMonitor::wait_for_peers(
    const RankProgress& mine,
    const std::function<std::vector<bootstrap::StoreClientInfo>()>& clients, Deadline until) {
  std::vector<int> missing;
  for (int r = 0; r < nranks_; ++r)
    if (r != rank_) missing.push_back(r);
  // The parked reads go over a connection of their own: this rank's other communicators may be
  // sharing store_ meanwhile.
  auto link = store_->watch_link(Deadline::after(kLinkWait));
  bootstrap::Store& parked = link.is_ok() && *link ? **link : *store_;
  const milliseconds slice = &parked == store_.get() ? kPeerPoll : kPeerSlice;
  std::int64_t request = -1;
  for (int round = 0; !missing.empty(); ++round) {
    const std::vector<int> failed = failed_ranks();
    const auto connected = clients();
    const bool read_answers = request >= 0 && round % kAskEvery == 0;
    std::erase_if(missing, [&](int r) {
      if (std::binary_search(failed.begin(), failed.end(), r)) return true;
      const RankIdentity& id = ranks_[static_cast<std::size_t>(r)];
      const bool linked = std::any_of(connected.begin(), connected.end(), [&](const auto& c) {
        return c.pid == static_cast<std::uint32_t>(id.pid) &&
               (c.host == id.hostname || c.host == id.host);
      });
      if (!linked) return true;  // its process no longer talks to the store
      if (!read_answers) return false;
      auto p = status_answer(request, r, kAnswerWait);
      if (p) return p->completed >= mine.completed && p->derived >= mine.derived;
      return has_left(r, kLookWait) == true;
    });
    if (missing.empty() || until.expired()) break;
    // Most jobs' ranks leave together: the first status request goes out after a few slices.
    if (round % kAskEvery == kAskEvery - 1) request = request_status(true);
    if (parked.get(prefix_ + kOthersLeft, until.earliest(Deadline::after(slice))).is_ok())
      return {};  // set once every rank but one counted out: that one is this rank
    std::lock_guard lk(mu_);
    if (stop_now_) break;
  }
  return missing;
}

void FailureMonitor::mark_left() {
  const std::uint8_t one[] = {'1'};
  (void)store_->set(prefix_ + "left/" + std::to_string(rank_), one);
}

// Sets kOthersLeft. The last rank may count out (and erase every key) before this set lands:
// then the count is n or gone, and this rank removes the key it set itself.
void FailureMonitor::tell_others_left() {
  const std::uint8_t one[] = {'1'};
  if (!store_->set(prefix_ + kOthersLeft, one).is_ok()) return;
  auto count = store_->peek(prefix_ + "left/count", Deadline::after(kLookWait));
  if (!count.is_ok()) return;
  if (*count) {
    auto now = bootstrap::parse_counter(**count, prefix_ + "left/count");
    if (!now.is_ok() || *now < nranks_) return;
  }
  (void)store_->erase_prefix(prefix_ + kOthersLeft);
}

void FailureMonitor::count_out(const std::string& comm_prefix) {
  if (store_broken_) return;
  auto n = store_->add(prefix_ + "left/count", 1);
  if (!n.is_ok()) return;
  // The rank whose process serves the store waits, before it leaves, until the others did: the
  // next-to-last rank to count out tells it in one key (wait_for_peers parks on it).
  if (*n == nranks_ - 1) tell_others_left();
  if (*n < nranks_) return;
  auto erased = store_->erase_prefix(comm_prefix);
  if (erased.is_ok())
    LOOM_LOG_DEBUG(Bootstrap, "rank {}: the last rank to leave; erased {} store keys under {}",
                   rank_, *erased, comm_prefix);
}

}  // namespace loom::detail
