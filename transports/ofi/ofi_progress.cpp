#include "transports/ofi/ofi_progress.hpp"

#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>

#include "log/log.hpp"

namespace loom::transport::ofi {
namespace {

// While requests are outstanding the thread polls, yielding between empty rounds; with none it
// sleeps until a request is posted, looking again at least this often.
constexpr auto kIdleSleep = std::chrono::milliseconds(5);

}  // namespace

bool choose_progress_thread(int setting, int cpus, int ranks_on_host) {
  if (setting >= 0) return setting > 0;
  return cpus / std::max(1, ranks_on_host) >= 2;
}

Result<std::unique_ptr<OfiProgress>> OfiProgress::start(Fabric& fabric, ExecutorFirstMutex& lock,
                                                        int rank) {
  std::unique_ptr<OfiProgress> p(new OfiProgress(fabric, lock, rank));
  p->notify_ = net::Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!p->notify_.valid()) return system_error(errno, "ofi progress thread: eventfd");
  p->thread_ = std::thread([raw = p.get()] { raw->run(); });
  LOOM_LOG_INFO(Net, "rank {}: ofi progress thread started", rank);
  return p;
}

OfiProgress::~OfiProgress() {
  {
    std::lock_guard<std::mutex> lk(wait_mu_);
    stop_.store(true, std::memory_order_release);
  }
  wait_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void OfiProgress::posted() {
  if (work_.fetch_add(1, std::memory_order_acq_rel) == 0) {
    std::lock_guard<std::mutex> lk(wait_mu_);  // pairs with the thread's check under wait_mu_
    wait_cv_.notify_one();
  }
}

void OfiProgress::finished() {
  work_.fetch_sub(1, std::memory_order_acq_rel);
}

void OfiProgress::consume() {
  if (!notified_.exchange(false, std::memory_order_acquire)) return;
  std::uint64_t v = 0;
  (void)!::read(notify_.get(), &v, sizeof v);
}

void OfiProgress::run() {
  while (!stop_.load(std::memory_order_acquire)) {
    if (work_.load(std::memory_order_acquire) <= 0) {
      std::unique_lock<std::mutex> lk(wait_mu_);
      wait_cv_.wait_for(lk, kIdleSleep, [&] {
        return stop_.load(std::memory_order_acquire) || work_.load(std::memory_order_acquire) > 0;
      });
      continue;
    }
    Result<int> handled = 0;
    {
      auto lk = lock_.helper();
      handled = fabric_.progress();
    }
    if (!handled.is_ok() || *handled > 0) {
      // Failures too: the executor's next test() reads the queue and reports them.
      std::uint64_t one = 1;
      (void)!::write(notify_.get(), &one, sizeof one);
      notified_.store(true, std::memory_order_release);
      if (!handled.is_ok()) {
        LOOM_LOG_DEBUG(Net, "rank {}: ofi progress thread: {}", rank_, handled.status().message());
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      continue;
    }
    sched_yield();
  }
}

}  // namespace loom::transport::ofi
