// Progress threads for the tcp transport. Each thread owns a share of the connections (assigned
// round-robin) and moves their bytes whenever their sockets are ready, so transfers go on while
// the executor reduces, copies or sleeps; the executor still makes progress itself while it
// polls (whoever holds a connection's lock does the I/O), and sleeps on the connection's
// completion eventfd. How many threads: TcpOptions::progress_threads (see choose_threads).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/socket.hpp"
#include "common/status.hpp"

namespace loom::transport::tcp {

class TcpConnection;

/// Progress threads for `threads_per_peer_setting` -1 (auto): one per CPU left over once each
/// rank of this host has one (cpus / ranks_on_host - 1), at most 2; none when the ranks already
/// fill the CPUs (a thread would then only steal time from a rank). 0 or more is taken as is
/// (at most 8).
int choose_threads(int setting, int cpus, int ranks_on_host);

class TcpProgress {
 public:
  /// Starts `threads` (>= 1) threads named for `rank` in logs.
  static Result<std::unique_ptr<TcpProgress>> start(int threads, int rank);
  /// Stops and joins every thread (bounded: each wakes within one poll).
  ~TcpProgress();
  TcpProgress(const TcpProgress&) = delete;
  TcpProgress& operator=(const TcpProgress&) = delete;

  /// Hands `c` to one thread and switches it to threaded mode. `c` must outlive this object.
  Status attach(TcpConnection& c);
  [[nodiscard]] int threads() const { return static_cast<int>(workers_.size()); }

 private:
  struct Worker {
    std::thread thread;
    net::Fd wake;  // eventfd: a connection got new work, or stop
    std::mutex mu;
    std::vector<TcpConnection*> conns;
  };
  explicit TcpProgress(int rank) : rank_(rank) {}
  void run(Worker& w);

  int rank_;
  std::atomic<bool> stop_{false};
  std::vector<std::unique_ptr<Worker>> workers_;
  std::size_t next_ = 0;
};

}  // namespace loom::transport::tcp
