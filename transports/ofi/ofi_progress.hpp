// An optional progress thread for the ofi transport. Providers with manual data progress (efa,
// tcp;ofi_rxm, shm) move data only inside fi_cq_read calls: while the executor reduces a chunk
// or sleeps, a rendezvous or a segmented transfer stands still. The thread reads the completion
// queue whenever requests are outstanding, dispatches completions to their connections, and
// signals the executor on an eventfd; the executor still reads the queue itself while it polls.
// One lock (the fabric's) guards the endpoint and every connection's request state.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "common/executor_first_mutex.hpp"
#include "common/socket.hpp"
#include "common/status.hpp"
#include "transports/ofi/ofi_fabric.hpp"

namespace loom::transport::ofi {

/// Whether to start the progress thread for `setting` -1 (auto): only when each rank of this host
/// has a CPU to spare for it (2 or more per rank); 0 never, 1 always.
bool choose_progress_thread(int setting, int cpus, int ranks_on_host);

class OfiProgress {
 public:
  static Result<std::unique_ptr<OfiProgress>> start(Fabric& fabric, ExecutorFirstMutex& lock,
                                                    int rank);
  /// Stops and joins the thread (bounded: it sleeps at most a few milliseconds at a time).
  ~OfiProgress();
  OfiProgress(const OfiProgress&) = delete;
  OfiProgress& operator=(const OfiProgress&) = delete;

  /// A request was posted (wakes the thread when it sleeps) / completed or failed.
  void posted();
  void finished();
  /// The descriptor the executor sleeps on; readable after the thread completed something.
  [[nodiscard]] int notify_fd() const { return notify_.get(); }
  /// Clears the notification; call with the lock held (then every completion notified so far is
  /// visible).
  void consume();

 private:
  OfiProgress(Fabric& fabric, ExecutorFirstMutex& lock, int rank)
      : fabric_(fabric), lock_(lock), rank_(rank) {}
  void run();

  Fabric& fabric_;
  ExecutorFirstMutex& lock_;
  int rank_;
  net::Fd notify_;
  std::atomic<bool> notified_{false};
  std::atomic<long> work_{0};  // requests posted and not yet finished
  std::atomic<bool> stop_{false};
  std::mutex wait_mu_;
  std::condition_variable wait_cv_;
  std::thread thread_;
};

}  // namespace loom::transport::ofi
