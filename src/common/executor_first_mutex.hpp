// A mutex shared by a rank's executor and a transport's progress thread, where the executor goes
// first. A plain std::mutex lets a looping progress thread take the lock again right after
// releasing it, before the woken executor runs: on busy CPUs (and under ThreadSanitizer) the
// executor can then wait for a completion the thread already recorded, until its deadline.
// Here the thread stands back whenever the executor is waiting, so the executor waits for at most
// one of the thread's passes.
#pragma once

#include <atomic>
#include <mutex>
#include <thread>

namespace loom {

class ExecutorFirstMutex {
 public:
  /// The executor's lock (blocking); announces itself so the progress thread lets it in first.
  [[nodiscard]] std::unique_lock<std::mutex> executor() {
    waiting_.fetch_add(1, std::memory_order_acq_rel);
    std::unique_lock<std::mutex> lk(mu_);
    waiting_.fetch_sub(1, std::memory_order_acq_rel);
    return lk;
  }

  /// The progress thread's lock (blocking): yields while an executor waits, then takes it.
  [[nodiscard]] std::unique_lock<std::mutex> helper() {
    while (waiting_.load(std::memory_order_acquire) > 0) std::this_thread::yield();
    return std::unique_lock<std::mutex>(mu_);
  }

  /// Executors waiting for the lock now (for tests).
  [[nodiscard]] int waiting() const { return waiting_.load(std::memory_order_acquire); }

 private:
  std::mutex mu_;
  std::atomic<int> waiting_{0};
};

}  // namespace loom
