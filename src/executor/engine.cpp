#include "executor/engine.hpp"

#include <poll.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <ctime>

#include "log/log.hpp"

namespace loom::exec {

using detail::OpState;

namespace {
constexpr unsigned kPollsPerClock = 8;
}  // namespace

std::shared_ptr<OpState> EngineCore::submit(std::unique_ptr<Task> task,
                                            const std::shared_ptr<EngineCore>& self) {
  auto op = std::make_shared<OpState>();
  op->task = std::move(task);
  op->engine = self;
  Lock lk(mu_);
  if (!failure_.is_ok()) {
    op->done = true;
    op->status = {failure_.code(), fmt::format("{}: the communicator failed earlier: {}",
                                               op->task->describe(), failure_.message())};
    op->task.reset();
    return op;
  }
  queue_.push_back(op);
  last_activity_ = Clock::now();
  if (!driving_ && queue_.size() == 1) undriven_since_ = last_activity_;
  // A parked worker has no tick; otherwise it will look at the queue soon anyway, and a caller
  // that waits now drives the operation itself without any wake-up.
  if (worker_parked_) work_cv_.notify_one();
  return op;
}

std::shared_ptr<OpState> EngineCore::make_done_state() {
  auto state = std::make_shared<OpState>();
  state->done = true;
  state->started = true;
  return state;
}

std::shared_ptr<OpState> EngineCore::submit_inline(std::unique_ptr<Task>& task,
                                                   Clock::duration budget,
                                                   const std::shared_ptr<EngineCore>& self,
                                                   Clock::time_point submitted) {
  {
    Lock lk(mu_);
    if (!queue_.empty() || driving_ || stop_ || !failure_.is_ok()) {
      lk.unlock();
      task->queued();
      return submit(std::move(task), self);
    }
    driving_ = true;  // the worker, waiters and idle checks keep off while this thread polls
  }
  std::optional<Status> ended = run_inline(*task, budget);
  const bool finished = ended && ended->is_ok();
  if (!finished) task->queued();  // still this thread's: driving_ keeps the worker off
  Lock lk(mu_);
  driving_ = false;
  last_activity_ = std::max(last_activity_, submitted);  // microseconds ago: within the budget
  done_cv_.notify_all();  // abort() and check_idle() wait for no thread to drive
  if (finished) {
    note_success();
    return done_inline_;
  }
  last_activity_ = Clock::now();  // queued from now on
  auto op = std::make_shared<OpState>();
  op->started = true;
  op->task = std::move(task);
  op->engine = self;
  if (ended) {
    finish(*op, std::move(*ended));  // the engine's failure, as for a queued operation
    return op;
  }
  queue_.push_front(op);  // before any call another thread queued meanwhile: it came later
  undriven_since_ = last_activity_;
  if (worker_parked_) work_cv_.notify_one();
  return op;
}

std::optional<Status> EngineCore::run_inline(Task& task, Clock::duration budget) {
  Status st = task.start(task.deadline());
  if (!st.is_ok()) return st;
  Clock::time_point until{};
  for (unsigned polls = 1;; ++polls) {
    if (aborted_.load(std::memory_order_acquire))
      return abort_status_.with_context(task.describe());
    auto r = task.progress();
    if (!r.is_ok()) return r.status();
    if (*r == Progress::Done) return Status::ok();
    if (polls % kPollsPerClock != 0) continue;  // the clock costs as much as a poll
    const auto now = Clock::now();
    if (until == Clock::time_point{})
      until = now + budget;
    else if (now >= until)
      return std::nullopt;
  }
}

Status EngineCore::wait(OpState& op, Deadline until) {
  Lock lk(mu_);
  bool asked = false;  // we asked the worker to hand driving over
  while (!op.done) {
    if (!driving_) {
      if (asked) handoff_.fetch_sub(1, std::memory_order_relaxed);
      asked = false;
      driving_ = true;
      drive(&op, lk, until);
      if (!op.done && until.expired()) break;
      continue;
    }
    if (worker_driving_ && !asked) {
      handoff_.fetch_add(1, std::memory_order_relaxed);
      asked = true;
    }
    if (until.at() == Clock::time_point::max()) {
      done_cv_.wait(lk);
    } else if (done_cv_.wait_until(lk, until.at()) == std::cv_status::timeout) {
      break;
    }
  }
  if (asked) handoff_.fetch_sub(1, std::memory_order_relaxed);
  if (!op.done)
    return {ErrorCode::Timeout, "Work::wait timed out; the operation is still in progress"};
  return op.status;
}

Result<bool> EngineCore::test(OpState& op) {
  Lock lk(mu_);
  if (!op.done && !driving_) {
    driving_ = true;
    drive(&op, lk, Deadline(Clock::now()));
  }
  if (!op.done) return false;
  if (!op.status.is_ok()) return op.status;
  return true;
}

Status EngineCore::failure() const {
  if (!failed_.load(std::memory_order_acquire)) return Status::ok();  // every call asks
  Lock lk(mu_);
  return failure_;
}

void EngineCore::set_failure(Status why) {
  failure_ = std::move(why);
  failed_.store(!failure_.is_ok(), std::memory_order_release);
}

void EngineCore::worker_loop() {
  Lock lk(mu_);
  while (!stop_) {
    if (worker_should_drive(lk)) {
      driving_ = true;
      worker_driving_ = true;
      drive(nullptr, lk, Deadline::never());
      worker_driving_ = false;
    }
  }
}

// Sleeps until there is an operation that no caller has driven for the grace period (true) or
// a tick passes (false). Parks without a tick once the communicator has been idle for long,
// waking only for the idle checks still due (EngineOptions::idle_check).
bool EngineCore::worker_should_drive(Lock& lk) {
  if (driving_) {  // another thread drives: look again after a tick, the lock released
    work_cv_.wait_for(lk, options_.max_block);
    return false;
  }
  auto now = Clock::now();
  if (!queue_.empty()) {
    auto due = undriven_since_ + options_.grace;
    if (now >= due) return true;
    work_cv_.wait_until(lk, due);
    return false;
  }
  if (idle_checks_left_ > 0) {
    const auto due = last_activity_ + next_idle_check_;
    if (now >= due) {
      --idle_checks_left_;
      next_idle_check_ *= 5;
      driving_ = true;
      (void)run_idle_check(lk);
    } else if (now - last_activity_ < options_.park_after) {  // the usual tick until then
      work_cv_.wait_for(lk, std::min<Clock::duration>(options_.max_block, due - now));
    } else {  // parked until then: submit() wakes it
      worker_parked_ = true;
      work_cv_.wait_until(lk, due, [&, gen = completions_] {
        return stop_ || !queue_.empty() || completions_ != gen;  // a new schedule
      });
      worker_parked_ = false;
    }
    return false;
  }
  if (now - last_activity_ >= options_.park_after) {
    worker_parked_ = true;
    work_cv_.wait(lk, [&] { return stop_ || !queue_.empty() || idle_checks_left_ > 0; });
    worker_parked_ = false;
    return false;
  }
  work_cv_.wait_for(lk, options_.max_block);
  return false;
}

Status EngineCore::run_idle_check(Lock& lk) {
  Status st;
  if (options_.idle_check && failure_.is_ok() && !aborted_.load(std::memory_order_acquire)) {
    lk.unlock();
    st = options_.idle_check();
    lk.lock();
  }
  driving_ = false;
  if (!st.is_ok()) {
    LOOM_LOG_ERROR(Exec, "{}", st.message());
    if (failure_.is_ok()) set_failure(options_.on_failure ? options_.on_failure(st) : st);
  }
  if (!queue_.empty()) undriven_since_ = Clock::now();  // submitted meanwhile: not driven yet
  done_cv_.notify_all();
  return st;
}

Status EngineCore::check_idle(Clock::duration grace) {
  Lock lk(mu_);
  if (!done_cv_.wait_for(lk, grace, [&] { return !driving_; })) return Status::ok();
  driving_ = true;
  return run_idle_check(lk);
}

void EngineCore::stop() {
  Lock lk(mu_);
  stop_ = true;
  work_cv_.notify_all();
}

void EngineCore::fail_all(const Status& why) {
  Lock lk(mu_);
  for (auto& op : queue_)
    if (!op->done) finish(*op, why);
  queue_.clear();
}

void EngineCore::abort(const Status& why, Clock::duration grace) {
  Lock lk(mu_);
  if (!aborted_.load(std::memory_order_relaxed)) {
    abort_status_ = why;
    aborted_.store(true, std::memory_order_release);
  }
  if (failure_.is_ok()) set_failure(why);
  work_cv_.notify_all();
  done_cv_.wait_for(lk, grace, [&] { return !driving_; });
  if (driving_) return;
  for (auto& op : queue_)
    if (!op->done) finish(*op, abort_status_.with_context(op->task->describe()));
  queue_.clear();
}

// Runs queued operations in order until `target` is done, the queue is empty, or `until`
// passes. Called with the lock held and driving_ set; clears driving_.
void EngineCore::drive(OpState* target, Lock& lk, Deadline until) {
  const bool by_worker = target == nullptr;
  while (!queue_.empty() && !stop_) {
    if (target != nullptr && target->done) break;
    if (by_worker && handoff_.load(std::memory_order_relaxed) > 0) break;
    auto op = queue_.front();
    if (!failure_.is_ok()) {
      finish(*op, {failure_.code(), fmt::format("{}: the communicator failed earlier: {}",
                                                op->task->describe(), failure_.message())});
    } else {
      run(*op, lk, until, by_worker);
      if (!op->done) break;
    }
    queue_.pop_front();
  }
  driving_ = false;
  last_activity_ = Clock::now();
  if (!queue_.empty()) {
    // Left for the worker (or the next caller): the grace period starts now.
    undriven_since_ = last_activity_;
    if (worker_parked_) work_cv_.notify_one();
  }
  done_cv_.notify_all();
}

// Drives one operation until it finishes, `until` passes, or (when the worker drives) a caller
// asks to take over. Unlocks while working.
void EngineCore::run(OpState& op, Lock& lk, Deadline until, bool by_worker) {
  lk.unlock();
  Status st;
  bool finished = false;
  if (!op.started) {
    op.started = true;
    st = op.task->start(op.task->deadline());
    finished = !st.is_ok();
  }
  Clock::time_point last_progress = Clock::now();
  bool blocked = false;  // yielded or blocked since the last progress
  // Idle polls since the clock was last read: the clock costs as much as a poll, so the spin
  // phase reads it once every kPollsPerClock polls (a few hundred ns at most).
  unsigned idle_polls = 0;
  Clock::duration next_stall_check = options_.stall_check_every;  // idle time of the next check
  while (!finished) {
    if (aborted_.load(std::memory_order_acquire)) {
      st = abort_status_.with_context(op.task->describe());
      finished = true;
      break;
    }
    auto r = op.task->progress();
    if (!r.is_ok() || *r == Progress::Done) {
      st = r.status();
      finished = true;
      break;
    }
    // A caller waits: let it drive (progress is resumable between calls).
    if (by_worker && handoff_.load(std::memory_order_relaxed) > 0) break;
    if (*r == Progress::Advanced) {
      const auto now = Clock::now();
      adapt_spin(now - last_progress, blocked);
      last_progress = now;
      blocked = false;
      idle_polls = 0;
      next_stall_check = options_.stall_check_every;
      continue;
    }
    if (++idle_polls < kPollsPerClock) continue;
    idle_polls = 0;
    auto idle = Clock::now() - last_progress;
    if (idle < spin_budget_) continue;  // spin: the cheapest wait when the peer has a CPU
    if (op.task->deadline().expired()) {
      st = make_error(ErrorCode::Timeout, "{} timed out: {}", op.task->describe(),
                      op.task->pending());
      finished = true;
      break;
    }
    if (until.expired()) break;
    if (options_.stall_check && idle >= next_stall_check) {
      next_stall_check = idle + options_.stall_check_every;
      st = options_.stall_check();
      if (!st.is_ok()) {
        st = st.with_context(op.task->describe());
        finished = true;
        break;
      }
    }
    st = idle_wait(*op.task, idle, until, blocked);
    finished = !st.is_ok();
  }
  if (finished && !st.is_ok() && options_.explain_failure) st = options_.explain_failure(st);
  lk.lock();
  if (finished) finish(op, st);
}

// After the spin budget: give the CPU away for a while (a peer sharing our core may be the one
// we wait for), then block on the transports' wake-up descriptors, at most max_block at a time
// so that a lost wake-up costs a millisecond, never a hang. A task that has nothing to block on
// for some of its waits (a device stream, a CUDA IPC peer: no descriptor announces progress)
// says so with no descriptor or one of -1; then the wait is a nap that grows with the idle time.
Status EngineCore::idle_wait(Task& task, Clock::duration idle, Deadline until, bool& blocked) {
  blocked = true;
  const Clock::duration yield = task.yield().value_or(options_.yield);
  if (idle < spin_budget_ + yield) {
    sched_yield();
    return Status::ok();
  }
  fds_.clear();
  if (!task.prepare_wait(fds_)) return Status::ok();  // progress is possible now
  const Deadline limit = task.deadline().earliest(until);
  const bool timed = fds_.empty() || std::any_of(fds_.begin(), fds_.end(),
                                                 [](const pollfd& p) { return p.fd < 0; });
  int rc = 0;
  if (timed) {  // no descriptor announces progress: nap (ppoll with none is a plain sleep)
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
        limit.left(backoff_nap(idle, options_.max_block)));
    const timespec ts{static_cast<time_t>(ns.count() / 1000000000),
                      static_cast<long>(ns.count() % 1000000000)};
    rc = ::ppoll(fds_.data(), fds_.size(), &ts, nullptr);
  } else {
    rc = ::poll(fds_.data(), fds_.size(),
                limit.poll_timeout_ms(static_cast<int>(options_.max_block.count())));
  }
  if (rc < 0 && errno != EINTR) return system_error(errno, task.describe() + ": poll");
  return Status::ok();
}

// Adaptive spinning: keep polling before yielding only while it pays. Progress that spinning
// caught, or that came soon after the budget ran out, grows the budget (up to the configured
// spin); a wait that outlasted twice the maximum shrinks it, so ranks that oversubscribe their
// CPUs (or share them with other work) stop stealing time from the peers they wait for.
void EngineCore::adapt_spin(Clock::duration idle, bool blocked) {
  const Clock::duration max = options_.spin;
  if (max.count() <= 0) return;
  if (!blocked || idle < max) {
    spin_budget_ = std::min<Clock::duration>(max, spin_budget_ * 2 + std::chrono::microseconds(1));
  } else if (idle > 2 * max) {
    spin_budget_ /= 2;
  }
}

void EngineCore::note_success() {
  if (!options_.idle_check) return;
  idle_checks_left_ = kIdleChecks;  // idle checks due again (see EngineOptions)
  next_idle_check_ = options_.idle_check_after;
  ++completions_;
  if (worker_parked_) work_cv_.notify_one();
}

void EngineCore::finish(OpState& op, Status status) {
  op.done = true;
  if (status.is_ok()) note_success();
  if (!status.is_ok()) {
    LOOM_LOG_ERROR(Exec, "{}", status.message());
    if (failure_.is_ok()) {
      if (options_.on_failure) status = options_.on_failure(status);
      set_failure(status);
    }
  }
  op.status = std::move(status);
  op.task.reset();
  done_cv_.notify_all();
}

Engine::Engine(EngineOptions options) : core_(std::make_shared<EngineCore>(std::move(options))) {
  worker_ = std::thread([core = core_] { core->worker_loop(); });
}

Engine::~Engine() {
  try {
    drain();
    core_->stop();
    if (worker_.joinable()) worker_.join();
    core_->fail_all({ErrorCode::InvalidUsage, "the communicator was destroyed"});
  } catch (const std::exception& e) {  // allocation or thread errors: nothing left to undo
    LOOM_LOG_ERROR(Exec, "shutting the engine down failed: {}", e.what());
  }
}

std::shared_ptr<OpState> Engine::submit(std::unique_ptr<Task> task) {
  return core_->submit(std::move(task), core_);
}

Status Engine::failure() const {
  return core_->failure();
}

void Engine::drain() {
  // Waiting for the last queued operation waits for all (they run in order); each is bounded
  // by its own deadline.
  std::shared_ptr<OpState> last = core_->last_queued();
  if (last) (void)core_->wait(*last, Deadline::never());
}

}  // namespace loom::exec
