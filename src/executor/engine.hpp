// The engine owns progress for one communicator: operations run one after another, in
// submission order, driven either by a background worker thread or, to save a thread hand-off,
// by a caller that is waiting for one of them.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "common/status.hpp"
#include "executor/task.hpp"

namespace loom::exec {
class EngineCore;
}

namespace loom::detail {

/// Shared state behind loom::Work. Guarded by the engine's mutex.
class OpState {
 public:
  bool done = false;
  bool started = false;
  Status status;
  std::unique_ptr<exec::Task> task;
  std::weak_ptr<exec::EngineCore> engine;
};

}  // namespace loom::detail

namespace loom::exec {

struct EngineOptions {
  std::chrono::microseconds spin{50};
  std::string name = "loom";  // for thread names and errors ("rank 3")
  /// Called (under the engine's lock: must not block or call back) when the first operation
  /// fails, with its status; returns the status to record (e.g. with more context).
  std::function<Status(const Status&)> on_failure;
};

/// The queue and the driving protocol, shared with Work handles (which may outlive the Engine).
class EngineCore {
 public:
  explicit EngineCore(EngineOptions options)
      : options_(std::move(options)), spin_budget_(options_.spin) {}

  std::shared_ptr<detail::OpState> submit(std::unique_ptr<Task> task,
                                          const std::shared_ptr<EngineCore>& self);
  /// Blocks until `op` is done or `until` passes (then Timeout); drives if nobody else is.
  Status wait(detail::OpState& op, Deadline until);
  /// Non-blocking check; makes one round of progress if nobody else is driving.
  Result<bool> test(detail::OpState& op);
  [[nodiscard]] Status failure() const;
  void worker_loop();
  void stop();
  std::shared_ptr<detail::OpState> last_queued() const {
    Lock lk(mu_);
    return queue_.empty() ? nullptr : queue_.back();
  }
  /// Fails every queued operation that has not completed (used at destruction).
  void fail_all(const Status& why);
  /// Fails the running operation (within one poll interval, 100 ms) and every later one with
  /// `why`, then waits (up to `grace`) until no thread drives. Thread-safe; non-blocking callers
  /// pass a zero grace.
  void abort(const Status& why, Clock::duration grace);

 private:
  using Lock = std::unique_lock<std::mutex>;
  void drive(detail::OpState* target, Lock& lk, Deadline until);
  void run(detail::OpState& op, Lock& lk, Deadline until);
  bool step(detail::OpState& op, Clock::time_point& last_progress, Deadline until);
  void finish(detail::OpState& op, Status status);
  void adapt_spin(Clock::duration idle, bool blocked);

  EngineOptions options_;
  Clock::duration spin_budget_{0};  // touched only by the driving thread
  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // the worker waits here
  std::condition_variable done_cv_;  // waiters wait here
  std::deque<std::shared_ptr<detail::OpState>> queue_;
  bool driving_ = false;
  bool stop_ = false;
  Status failure_;
  std::atomic<bool> aborted_{false};
  Status abort_status_;  // written once before aborted_ is set
};

class Engine {
 public:
  explicit Engine(EngineOptions options);
  ~Engine();  // completes or fails every queued operation, then stops the worker
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  /// Queues `task`; returns its state (already failed if the engine has failed).
  std::shared_ptr<detail::OpState> submit(std::unique_ptr<Task> task);
  /// The first failure, if any: every later operation fails with it.
  [[nodiscard]] Status failure() const;
  /// Waits for every queued operation (each bounded by its own deadline).
  void drain();
  /// See EngineCore::abort.
  void abort(const Status& why, Clock::duration grace) { core_->abort(why, grace); }

 private:
  std::shared_ptr<EngineCore> core_;
  std::thread worker_;
};

}  // namespace loom::exec
