#include "executor/engine.hpp"

#include <poll.h>
#include <pthread.h>

#include <cerrno>

#include "log/log.hpp"

namespace loom::exec {

using detail::OpState;

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
  if (!driving_) work_cv_.notify_one();
  return op;
}

Status EngineCore::wait(OpState& op, Deadline until) {
  Lock lk(mu_);
  while (!op.done) {
    if (!driving_) {
      driving_ = true;
      drive(&op, lk, until);
      if (!op.done && until.expired()) break;
      continue;
    }
    if (until.at() == Clock::time_point::max()) {
      done_cv_.wait(lk);
    } else if (done_cv_.wait_until(lk, until.at()) == std::cv_status::timeout) {
      break;
    }
  }
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
  Lock lk(mu_);
  return failure_;
}

void EngineCore::worker_loop() {
  Lock lk(mu_);
  for (;;) {
    work_cv_.wait(lk, [&] { return stop_ || (!queue_.empty() && !driving_); });
    if (stop_) return;
    driving_ = true;
    drive(nullptr, lk, Deadline::never());
  }
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
  if (failure_.is_ok()) failure_ = why;
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
  while (!queue_.empty() && !stop_) {
    if (target != nullptr && target->done) break;
    auto op = queue_.front();
    if (!failure_.is_ok()) {
      finish(*op, {failure_.code(), fmt::format("{}: the communicator failed earlier: {}",
                                                op->task->describe(), failure_.message())});
    } else {
      run(*op, lk, until);
      if (!op->done) break;
    }
    queue_.pop_front();
  }
  driving_ = false;
  if (!queue_.empty()) work_cv_.notify_one();
  done_cv_.notify_all();
}

// Drives one operation until it finishes or `until` passes. Unlocks while working.
void EngineCore::run(OpState& op, Lock& lk, Deadline until) {
  lk.unlock();
  Status st;
  bool finished = false;
  if (!op.started) {
    op.started = true;
    st = op.task->start(op.task->deadline());
    finished = !st.is_ok();
  }
  Clock::time_point last_progress = Clock::now();
  bool blocked = false;  // blocked in poll since the last progress
  std::vector<pollfd> fds;
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
    auto now = Clock::now();
    if (*r == Progress::Advanced) {
      adapt_spin(now - last_progress, blocked);
      last_progress = now;
      blocked = false;
      continue;
    }
    if (now - last_progress < spin_budget_) continue;
    if (op.task->deadline().expired()) {
      st = make_error(ErrorCode::Timeout, "{} timed out: {}", op.task->describe(),
                      op.task->pending());
      finished = true;
      break;
    }
    if (until.expired()) break;
    fds.clear();
    if (!op.task->prepare_wait(fds)) continue;
    blocked = true;
    int timeout_ms = op.task->deadline().earliest(until).poll_timeout_ms(100);
    if (fds.empty()) {
      std::this_thread::yield();
    } else if (::poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) {
      st = system_error(errno, op.task->describe() + ": poll");
      finished = true;
    }
  }
  lk.lock();
  if (finished) finish(op, st);
}

// Adaptive spinning: keep polling before blocking only while it pays. A wait that spinning
// caught, or that ended soon after blocking, grows the budget (up to the configured spin); a
// wait that outlasted it shrinks the budget, so ranks that oversubscribe their CPUs (or share
// them with other work) stop stealing time from the peers they wait for.
void EngineCore::adapt_spin(Clock::duration idle, bool blocked) {
  const Clock::duration max = options_.spin;
  if (max.count() <= 0) return;
  if (!blocked || idle < max)
    spin_budget_ = std::min<Clock::duration>(max, spin_budget_ * 2 + std::chrono::microseconds(1));
  else
    spin_budget_ /= 2;
}

void EngineCore::finish(OpState& op, Status status) {
  op.done = true;
  if (!status.is_ok()) {
    LOOM_LOG_ERROR(Exec, "{}", status.message());
    if (failure_.is_ok()) {
      if (options_.on_failure) status = options_.on_failure(status);
      failure_ = status;
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
  drain();
  core_->stop();
  if (worker_.joinable()) worker_.join();
  core_->fail_all({ErrorCode::InvalidUsage, "the communicator was destroyed"});
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
