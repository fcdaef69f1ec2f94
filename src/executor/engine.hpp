// The engine owns progress for one communicator: operations run one after another, in
// submission order, driven either by a background worker thread or, to save a thread hand-off,
// by a caller that is waiting for one of them.
//
// Wake-ups cost more than small collectives, so the hot path makes none: submit() wakes the
// worker only when it is parked after a long idle spell; otherwise the worker looks at the queue
// on a bounded tick and takes over only operations that nobody has driven for a grace period
// (a caller that waits right after submitting drives its own operation). While an operation has
// nothing to do, the driving thread polls for the spin budget, then yields the CPU for a while,
// then blocks on the transports' wake-up descriptors with a bounded timeout.
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
#include <vector>

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
  /// A call made inside a group: the state of the operation that carries it once the group has
  /// ended (set by the issuing thread at group_end, before the caller can wait; null before).
  std::shared_ptr<OpState> forward;
  bool grouped = false;  // made inside a group (forward is set when the group ends)
  /// Grouped: "rank 1: allreduce #3 (...)", for errors before then (made only when needed).
  std::function<std::string()> grouped_call;
};

}  // namespace loom::detail

namespace loom::exec {

struct EngineOptions {
  std::chrono::microseconds spin{50};  // upper bound of the adaptive spin budget
  /// After the spin budget, how long the driving thread sched_yield()s before it blocks.
  std::chrono::microseconds yield{20};
  /// An operation nobody drove for this long is taken over by the worker.
  std::chrono::microseconds grace{200};
  /// The longest block in poll(2) (bounds the cost of a lost wake-up) and the worker's tick.
  std::chrono::milliseconds max_block{1};
  /// The worker parks without a tick after this long without any operation.
  std::chrono::milliseconds park_after{100};
  std::string name = "loom";  // for thread names and errors ("rank 3")
  /// Called (under the engine's lock: must not block or call back) when the first operation
  /// fails, with its status; returns the status to record (e.g. with more context).
  std::function<Status(const Status&)> on_failure;
  /// Run by the worker while no thread drives, once the queue has stayed empty for
  /// `idle_check_after` after operations completed, then again after 5, 25, 125 and 625 times
  /// that (a peer may send later: 20 ms, 100 ms, 0.5 s, 2.5 s, 12.5 s), and by check_idle(): a
  /// failure it returns is the engine's first failure, as if an operation had failed (messages
  /// that a mismatched call left unread). Null: none.
  std::function<Status()> idle_check;
  std::chrono::milliseconds idle_check_after{20};
  /// Run by the driving thread while an operation waits: once it has made no progress for
  /// `stall_check_every`, then again each time as long: a failure it returns fails the
  /// operation (a message no call will receive while this one waits). Null: none.
  std::function<Status()> stall_check;
  std::chrono::milliseconds stall_check_every{100};
  /// Run by the driving thread (not under the lock, may wait briefly) when an operation fails,
  /// before the failure is recorded: returns the failure to report (a peer that closed its
  /// connection because it had found a mismatched call: that mismatch). Null: as it is.
  std::function<Status(const Status&)> explain_failure;
};

/// The queue and the driving protocol, shared with Work handles (which may outlive the Engine).
class EngineCore {
 public:
  explicit EngineCore(EngineOptions options)
      : options_(std::move(options)), spin_budget_(options_.spin) {}

  std::shared_ptr<detail::OpState> submit(std::unique_ptr<Task> task,
                                          const std::shared_ptr<EngineCore>& self);
  /// Runs `task` on the calling thread when no operation is queued and no thread drives: starts
  /// it and polls it for at most `budget` (one round of polls when zero). Finished there, it
  /// returns the engine's completed state (shared by every call done so, never queued: a small
  /// call skips the queue, the handoff and a state of its own); failed there, a failed state (the
  /// engine's failure, as if queued); otherwise the task goes first in the queue with the
  /// progress it made, as submit() would have queued it. Otherwise it is submit(). `submitted`:
  /// when the caller made the call (the engine's last activity when it finishes here, so the
  /// small call's path reads the clock once). Finished here, `task` stays the caller's (to be
  /// reused); otherwise the engine takes it, calling Task::queued() first.
  std::shared_ptr<detail::OpState> submit_inline(std::unique_ptr<Task>& task, Clock::duration budget,
                                                 const std::shared_ptr<EngineCore>& self,
                                                 Clock::time_point submitted);
  /// Blocks until `op` is done or `until` passes (then Timeout); drives if nobody else is.
  Status wait(detail::OpState& op, Deadline until);
  /// Non-blocking check; makes one round of progress if nobody else is driving.
  Result<bool> test(detail::OpState& op);
  [[nodiscard]] Status failure() const;
  void worker_loop();
  /// The current adaptive spin budget (for tests and diagnostics).
  [[nodiscard]] Clock::duration spin_budget() const {
    Lock lk(mu_);
    return spin_budget_;
  }
  void stop();
  std::shared_ptr<detail::OpState> last_queued() const {
    Lock lk(mu_);
    return queue_.empty() ? nullptr : queue_.back();
  }
  /// Runs options.idle_check now, as the driving thread (waits up to `grace` for the one that
  /// drives to stop), unless the engine failed; returns (and records) its failure.
  Status check_idle(Clock::duration grace);
  /// Fails every queued operation that has not completed (used at destruction).
  void fail_all(const Status& why);
  /// Fails the running operation (within one poll interval, 100 ms) and every later one with
  /// `why`, then waits (up to `grace`) until no thread drives. Thread-safe; non-blocking callers
  /// pass a zero grace.
  void abort(const Status& why, Clock::duration grace);

 private:
  using Lock = std::unique_lock<std::mutex>;
  void drive(detail::OpState* target, Lock& lk, Deadline until);
  void run(detail::OpState& op, Lock& lk, Deadline until, bool by_worker);
  bool step(detail::OpState& op, Clock::time_point& last_progress, Deadline until);
  void finish(detail::OpState& op, Status status);
  /// submit_inline's polls: the task's status when it ended, nullopt while it is still running.
  std::optional<Status> run_inline(Task& task, Clock::duration budget);
  /// A successful operation's bookkeeping (idle checks due again), under the lock.
  void note_success();
  void set_failure(Status why);  // under the lock
  void adapt_spin(Clock::duration idle, bool blocked);
  Status idle_wait(Task& task, Clock::duration idle, Deadline until, bool& blocked);
  bool worker_should_drive(Lock& lk);
  /// With driving_ just set by the caller: runs the idle check unlocked, then clears driving_.
  Status run_idle_check(Lock& lk);

  EngineOptions options_;
  Clock::duration spin_budget_{0};  // touched only by the driving thread
  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // the worker waits here
  std::condition_variable done_cv_;  // waiters wait here
  std::deque<std::shared_ptr<detail::OpState>> queue_;
  // What submit_inline returns for every call it finished (immutable once made).
  const std::shared_ptr<detail::OpState> done_inline_ = make_done_state();
  static std::shared_ptr<detail::OpState> make_done_state();
  std::vector<pollfd> fds_;             // reused by the driving thread
  Clock::time_point undriven_since_{};  // when the queue last became ready without a driver
  Clock::time_point last_activity_{};   // last submit or drive
  bool driving_ = false;
  bool worker_driving_ = false;
  // Callers blocked in wait() while the worker drives: the worker hands driving over to them at
  // the next safe point, so a waiting caller runs the operations itself instead of being woken
  // once per completed operation.
  std::atomic<int> handoff_{0};
  bool worker_parked_ = false;  // the worker waits without a tick: submit() must wake it
  static constexpr int kIdleChecks = 5;
  int idle_checks_left_ = 0;           // idle checks still due since the last completion
  Clock::duration next_idle_check_{};  // after last_activity_
  std::uint64_t completions_ = 0;      // successful operations (with an idle check)
  bool stop_ = false;
  Status failure_;
  std::atomic<bool> failed_{false};  // !failure_.is_ok(), read without the lock
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
  /// See EngineCore::submit_inline.
  std::shared_ptr<detail::OpState> submit_inline(std::unique_ptr<Task> task, Clock::duration budget,
                                                 Clock::time_point submitted = Clock::now()) {
    return core_->submit_inline(task, budget, core_, submitted);
  }
  /// The same, and a task that finished on the calling thread stays in `task`, to be reused.
  std::shared_ptr<detail::OpState> submit_inline_keeping(std::unique_ptr<Task>& task,
                                                         Clock::duration budget,
                                                         Clock::time_point submitted) {
    return core_->submit_inline(task, budget, core_, submitted);
  }
  /// The first failure, if any: every later operation fails with it.
  [[nodiscard]] Status failure() const;
  /// Waits for every queued operation (each bounded by its own deadline).
  void drain();
  /// See EngineCore::abort.
  void abort(const Status& why, Clock::duration grace) { core_->abort(why, grace); }
  /// See EngineCore::check_idle (call after drain()).
  Status check_idle(Clock::duration grace) { return core_->check_idle(grace); }

 private:
  std::shared_ptr<EngineCore> core_;
  std::thread worker_;
};

}  // namespace loom::exec
