#include "transports/tcp/tcp_progress.hpp"

#include <poll.h>
#include <sys/eventfd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

#include "log/log.hpp"
#include "transports/tcp/tcp_connection.hpp"

namespace loom::transport::tcp {
namespace {

// Longest a thread sleeps without looking again: bounds the cost of a wake-up that is lost
// (none should be) and of stop() racing a poll.
constexpr int kMaxSleepMs = 100;

void drain(int fd) {
  std::uint64_t v = 0;
  while (::read(fd, &v, sizeof v) > 0) {
  }
}

}  // namespace

int choose_threads(int setting, int cpus, int ranks_on_host) {
  if (setting >= 0) return std::min(setting, 8);
  return std::clamp(cpus / std::max(1, ranks_on_host) - 1, 0, 2);
}

Result<std::unique_ptr<TcpProgress>> TcpProgress::start(int threads, int rank) {
  std::unique_ptr<TcpProgress> p(new TcpProgress(rank));
  for (int i = 0; i < std::max(1, threads); ++i) {
    auto w = std::make_unique<Worker>();
    w->wake = net::Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!w->wake.valid()) return system_error(errno, "tcp progress thread: eventfd");
    p->workers_.push_back(std::move(w));
  }
  for (auto& w : p->workers_) {
    Worker* raw = w.get();
    w->thread = std::thread([p = p.get(), raw] { p->run(*raw); });
  }
  LOOM_LOG_DEBUG(Net, "rank {}: {} tcp progress thread(s) started", rank, p->workers_.size());
  return p;
}

TcpProgress::~TcpProgress() {
  stop_.store(true, std::memory_order_release);
  for (auto& w : workers_) {
    std::uint64_t one = 1;
    (void)!::write(w->wake.get(), &one, sizeof one);
  }
  for (auto& w : workers_)
    if (w->thread.joinable()) w->thread.join();
  LOOM_LOG_DEBUG(Net, "rank {}: tcp progress threads stopped", rank_);
}

Status TcpProgress::attach(TcpConnection& c) {
  Worker& w = *workers_[next_++ % workers_.size()];
  LOOM_RETURN_IF_ERROR(c.enable_thread(w.wake.get()));
  {
    std::lock_guard<std::mutex> lk(w.mu);
    w.conns.push_back(&c);
  }
  std::uint64_t one = 1;
  (void)!::write(w.wake.get(), &one, sizeof one);
  return Status::ok();
}

// Waits for any of its connections' sockets (only those with queued work) or a wake-up, then
// lets every connection with ready sockets make progress.
void TcpProgress::run(Worker& w) {
  std::vector<pollfd> fds;
  std::vector<std::pair<std::size_t, TcpConnection*>> spans;  // first fd index of each conn
  while (!stop_.load(std::memory_order_acquire)) {
    fds.clear();
    spans.clear();
    fds.push_back({w.wake.get(), POLLIN, 0});
    int timeout = kMaxSleepMs;
    {
      std::lock_guard<std::mutex> lk(w.mu);
      for (TcpConnection* c : w.conns) {
        spans.emplace_back(fds.size(), c);
        if (c->thread_poll_fds(fds)) timeout = 0;
      }
    }
    int n = ::poll(fds.data(), fds.size(), timeout);
    if (n < 0 && errno != EINTR) {
      LOOM_LOG_ERROR(Net, "rank {}: tcp progress thread: poll failed ({})", rank_, errno);
      return;
    }
    if (stop_.load(std::memory_order_acquire)) return;
    if (fds[0].revents != 0) drain(w.wake.get());
    for (std::size_t i = 0; i < spans.size(); ++i) {
      std::size_t end = i + 1 < spans.size() ? spans[i + 1].first : fds.size();
      bool ready = timeout == 0;
      for (std::size_t f = spans[i].first; f < end && !ready; ++f) ready = fds[f].revents != 0;
      if (ready) spans[i].second->thread_progress();
    }
  }
}

}  // namespace loom::transport::tcp
