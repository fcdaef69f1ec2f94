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

constexpr milliseconds kPeerPoll{50};  // wait_for_peers: left markers, connections
constexpr int kAskEvery = 4;           // ... and a status request every 4th poll
constexpr milliseconds kAnswerWait{0};
constexpr milliseconds kGoneWait{1000};  // a store that takes longer is answering nothing else

}  // namespace

int FailureMonitor::rank_of(std::uint32_t pid, const std::string& host) const {
  for (int r = 0; r < nranks_; ++r) {
    const RankIdentity& id = ranks_[static_cast<std::size_t>(r)];
    if (static_cast<std::uint32_t>(id.pid) == pid && (id.hostname == host || id.host == host))
      return r;
  }
  return -1;
}

bool FailureMonitor::has_left(int r) {
  return store_->get(prefix_ + "left/" + std::to_string(r), Deadline::after(milliseconds(0)))
      .is_ok();
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
    if (has_left(r)) continue;  // destroyed its communicator first: not a failure
    poll_store();               // what the others said first comes first
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

std::vector<int> FailureMonitor::wait_for_peers(
    const RankProgress& mine,
    const std::function<std::vector<bootstrap::StoreClientInfo>()>& clients, Deadline until) {
  std::vector<int> missing;
  for (int r = 0; r < nranks_; ++r)
    if (r != rank_) missing.push_back(r);
  std::int64_t request = -1;
  for (int round = 0; !missing.empty(); ++round) {
    const std::vector<int> failed = failed_ranks();
    const auto connected = clients();
    if (round % kAskEvery == 0) request = request_status(true);
    std::erase_if(missing, [&](int r) {
      if (std::binary_search(failed.begin(), failed.end(), r) || has_left(r)) return true;
      const RankIdentity& id = ranks_[static_cast<std::size_t>(r)];
      const bool linked = std::any_of(connected.begin(), connected.end(), [&](const auto& c) {
        return c.pid == static_cast<std::uint32_t>(id.pid) &&
               (c.host == id.hostname || c.host == id.host);
      });
      if (!linked) return true;  // its process no longer talks to the store
      if (request < 0) return false;
      auto p = status_answer(request, r, kAnswerWait);
      return p && p->completed >= mine.completed && p->derived >= mine.derived;
    });
    if (missing.empty() || until.expired()) break;
    std::unique_lock lk(mu_);
    cv_.wait_for(lk, kPeerPoll, [&] { return stop_now_; });
    if (stop_now_) break;
  }
  return missing;
}

void FailureMonitor::count_out(const std::string& comm_prefix) {
  if (store_broken_) return;
  auto n = store_->add(prefix_ + "left/count", 1);
  if (!n.is_ok() || *n < nranks_) return;
  auto erased = store_->erase_prefix(comm_prefix);
  if (erased.is_ok())
    LOOM_LOG_DEBUG(Bootstrap, "rank {}: the last rank to leave; erased {} store keys under {}",
                   rank_, *erased, comm_prefix);
}

}  // namespace loom::detail
