// CommImpl: leaving. A rank's last call must be safe to be its last: its peers may still be
// finishing operations it has completed, and those may need the rendezvous store (lazy
// connections) that this rank's process serves. So the store's host waits for them before the
// store goes, every rank marks itself as left (its exit is then no failure), and the last rank to
// leave erases the communicator's keys from the store.
#include <algorithm>

#include "core/comm_impl.hpp"
#include "core/status_signal.hpp"
#include "log/log.hpp"

namespace loom::detail {

CommImpl::~CommImpl() {
  unregister_for_status(this);  // first: the SIGUSR1 report may be reading this communicator
  // Drain first (a peer's failure, reported by the monitor, still fails what hangs), then stop
  // the monitor (it finishes a pending hang report), then the engine.
  if (engine_) engine_->drain();
  // Messages of finished calls that no call took: a mismatched call (reported to the others).
  if (engine_ && !aborted_.load() && !engine_->check_idle(std::chrono::seconds(1)).is_ok())
    LOOM_LOG_ERROR(Coll, "rank {}: the communicator was destroyed after a mismatched call", rank_);
  if (monitor_ && !aborted_.load()) leave();
  engine_.reset();
}

void CommImpl::leave() {
  linger_for_peers();
  monitor_->mark_left();
  monitor_->stop();
  monitor_->count_out(fmt::format("loom/{:016x}/", comm_id_));
}

void CommImpl::linger_for_peers() {
  if (!server_ || nranks_ == 1 || !async_error().is_ok()) return;
  const RankProgress mine = progress();
  const auto started = Clock::now();
  const std::vector<int> missing = monitor_->wait_for_peers(
      mine, [this] { return server_->clients(); }, Deadline::after(settings_.timeout));
  const auto waited =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count();
  if (!missing.empty()) {
    LOOM_LOG_WARN(Init,
                  "rank {}: leaving after {} ms although ranks {} may still need the rendezvous "
                  "store this process serves (they neither finished operation #{} nor left)",
                  rank_, waited, format_rank_ranges(missing), mine.completed);
  } else if (waited > 0) {
    LOOM_LOG_DEBUG(Init, "rank {}: waited {} ms for the other ranks before the store goes", rank_,
                   waited);
  }
}

}  // namespace loom::detail
