#include "loom_work.hpp"

#include <ATen/core/jit_type.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <c10/util/Exception.h>

#include <optional>
#include <utility>

namespace loom_torch {

std::exception_ptr make_backend_error(const std::string& message) {
  return std::make_exception_ptr(C10_BUILD_ERROR(DistBackendError, message));
}

LoomWork::LoomWork(IssuedOp op, std::shared_ptr<CompletionWatcher> watcher)
    : c10d::Work(op.rank, op.type, nullptr), op_(std::move(op)), watcher_(std::move(watcher)) {
  auto type = c10::ListType::create(c10::TensorType::get());
  if (op_.stream) {  // a CUDA-aware future: its value is ready in stream order
    future_ = c10::make_intrusive<c10::ivalue::Future>(
        type, std::vector<c10::Device>{op_.stream->device()});
  } else {
    future_ = c10::make_intrusive<c10::ivalue::Future>(type);
  }
}

void LoomWork::enqueued() {
  std::lock_guard lk(settle_mu_);
  if (!op_.stream || end_) return;
  if (op_.on_success) {
    op_.on_success();  // torch's copies run on the current stream: after the loom calls
    op_.on_success = nullptr;
  }
  end_.emplace(op_.stream->device_type());
  end_->record(*op_.stream);
  // Events on the current stream, the op's (settle() completed it if the op failed already).
  if (!future_->completed()) future_->markCompleted(c10::IValue(op_.outputs));
}

LoomWork::~LoomWork() = default;

std::exception_ptr LoomWork::torch_error(const loom::Error& e) const {
  std::string msg =
      "loom " + op_.name + " failed (" + std::string(loom::to_string(e.code())) + "): " + e.what();
  // PyTorch's backends (and the scripts that read their errors) say "Timed out" for a deadline.
  if (e.code() == loom::ErrorCode::Timeout)
    msg = "loom " + op_.name + " failed (Timeout): Timed out before it completed: " + e.what();
  if (op_.failure_context &&
      (e.code() == loom::ErrorCode::PeerFailed || e.code() == loom::ErrorCode::Timeout)) {
    const std::string context = op_.failure_context();
    if (!context.empty()) msg += " [communicator status: " + context + "]";
  }
  return make_backend_error(msg);
}

bool LoomWork::loom_done(std::exception_ptr& error) {
  for (const auto& w : op_.works) {
    try {
      if (!w.test()) return false;
    } catch (const loom::Error& e) {
      error = torch_error(e);
      return true;  // a failed call ends the op (later ones fail with the same cause)
    }
  }
  return true;
}

void LoomWork::settle(std::exception_ptr error) {
  std::lock_guard lk(settle_mu_);
  if (settled_.load(std::memory_order_acquire)) return;
  if (!error && op_.on_success && !op_.stream) {  // stream-ordered: copied in enqueued()
    try {
      op_.on_success();
    } catch (...) {
      error = std::current_exception();
    }
  }
  // A stream-ordered op's future completed when it was enqueued; its error is the Work's.
  if (!future_->completed()) {
    if (error) {
      future_->setError(error);
    } else {
      future_->markCompleted(c10::IValue(op_.outputs));
    }
  }
  // The loom calls are done: staging buffers may go (outputs stay for result()).
  op_.keep_alive.clear();
  if (!op_.stream) op_.on_success = nullptr;  // a stream-ordered op's copies run in enqueued()
  finish(error);                              // c10d::Work: completed_, exception_, wakes waiters
  settled_.store(true, std::memory_order_release);
}

bool LoomWork::poll() {
  if (settled_.load(std::memory_order_acquire)) return true;
  std::exception_ptr error;
  if (!loom_done(error)) return false;
  settle(error);
  return true;
}

void LoomWork::drive() {
  if (settled_.load(std::memory_order_acquire)) return;
  std::exception_ptr error;
  for (const auto& w : op_.works) {
    try {
      w.wait();  // bounded by the operation's own deadline (CommOptions/CollOptions timeout)
    } catch (const loom::Error& e) {
      error = torch_error(e);
      break;
    }
  }
  settle(error);
}

bool LoomWork::isCompleted() {
  if (!poll()) return false;
  std::lock_guard lk(settle_mu_);
  return !end_ || end_->query();  // stream-ordered: also done on the device
}

bool LoomWork::isSuccess() const {
  std::lock_guard lk(mutex_);
  return completed_ && !exception_;
}

std::exception_ptr LoomWork::exception() const {
  std::lock_guard lk(mutex_);
  return exception_;
}

std::vector<at::Tensor> LoomWork::result() {
  return op_.outputs;
}

int LoomWork::sourceRank() const {
  TORCH_CHECK(op_.source != nullptr,
              "loom: sourceRank() is known only for a receive from any "
              "source (recv with src=None)");
  {
    std::lock_guard lk(mutex_);
    TORCH_CHECK(completed_ && !exception_, "loom: ", op_.name,
                " has not completed successfully: "
                "its sender is not known (wait() first)");
  }
  return *op_.source;
}

void LoomWork::rethrow_if_failed() const {
  std::lock_guard lk(mutex_);
  if (exception_) std::rethrow_exception(exception_);
}

bool LoomWork::wait(std::chrono::milliseconds timeout) {
  if (op_.stream) {
    // As ProcessGroupNCCL: the caller's current stream waits for the op; the host goes on.
    {
      std::lock_guard lk(settle_mu_);
      if (end_) {
        c10::impl::VirtualGuardImpl impl(op_.stream->device_type());
        end_->block(impl.getStream(op_.stream->device()));
      }
    }
    poll();  // a loom error known by now is raised now (later ones at the next wait or call)
    rethrow_if_failed();
    return true;
  }
  if (!settled_.load(std::memory_order_acquire)) {
    if (timeout <= kNoTimeout) {
      drive();
    } else {
      const auto until = std::chrono::steady_clock::now() + timeout;
      std::exception_ptr error;
      bool failed = false;
      for (const auto& w : op_.works) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            until - std::chrono::steady_clock::now());
        try {
          w.wait(std::max(left, std::chrono::milliseconds(0)));
        } catch (const loom::Error& e) {
          // A bounded wait that ran out leaves the operation running; anything else failed it.
          if (e.code() == loom::ErrorCode::Timeout && !loom_done(error)) {
            std::rethrow_exception(make_backend_error(
                "loom " + op_.name + ": wait(timeout=" + std::to_string(timeout.count()) +
                " ms) timed out; the operation is still in progress (" + e.what() + ")"));
          }
          if (!error) error = torch_error(e);
          failed = true;
          break;
        }
      }
      settle(failed ? error : nullptr);
    }
  }
  rethrow_if_failed();
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> LoomWork::getFuture() {
  if (op_.stream) return future_;  // completed when enqueued (stream order)
  if (!settled_.load(std::memory_order_acquire) && watcher_ &&
      !watched_.exchange(true, std::memory_order_acq_rel)) {
    watcher_->watch(c10::intrusive_ptr<LoomWork>::reclaim_copy(this));
  }
  return future_;
}

CompletionWatcher::~CompletionWatcher() {
  stop();
}

void CompletionWatcher::watch(c10::intrusive_ptr<LoomWork> work) {
  std::lock_guard lk(mu_);
  if (stopping_) {
    // The backend is shutting down: settle here (bounded by the op's deadline).
    work->drive();
    return;
  }
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  queue_.push_back(std::move(work));
  cv_.notify_one();
}

void CompletionWatcher::stop() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
    cv_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
}

void CompletionWatcher::loop() {
  std::unique_lock lk(mu_);
  for (;;) {
    cv_.wait(lk, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping and drained
    auto work = std::move(queue_.front());
    queue_.pop_front();
    lk.unlock();
    work->drive();
    work.reset();
    lk.lock();
  }
}

}  // namespace loom_torch
