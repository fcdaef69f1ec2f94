// A unit of work the engine drives: one collective on one communicator.
#pragma once

#include <poll.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/deadline.hpp"
#include "common/status.hpp"

namespace loom::exec {

enum class Progress { Idle, Advanced, Done };

class Task {
 public:
  virtual ~Task() = default;
  /// Called once, by the driving thread, before the first progress(); may block up to
  /// `deadline` (e.g. to establish connections).
  virtual Status start(Deadline deadline) = 0;
  /// Non-blocking: does what can be done now.
  virtual Result<Progress> progress() = 0;
  /// File descriptors to block on when progress() is Idle; false: don't block, progress now.
  /// A descriptor of -1, or none at all, asks for a timed wake-up (nothing announces progress,
  /// e.g. a device stream): the engine naps, backing off (transport::want_timed_wakeup).
  virtual bool prepare_wait(std::vector<pollfd>& fds) = 0;
  /// "allreduce #3 (...)" for errors and logs.
  [[nodiscard]] virtual std::string describe() const = 0;
  /// What the task is still waiting for, for timeout reports.
  [[nodiscard]] virtual std::string pending() const = 0;
  [[nodiscard]] virtual Deadline deadline() const = 0;
  /// How long the driving thread sched_yield()s after the spin budget before it blocks, when
  /// this task wants other than the engine's (EngineOptions::yield).
  [[nodiscard]] virtual std::optional<std::chrono::microseconds> yield() const {
    return std::nullopt;
  }
  /// Called by Engine::submit_inline when the task has not finished on the caller's thread,
  /// before it is queued or failed: bookkeeping a task defers while it may still finish there
  /// (one update instead of three, for calls that take under a microsecond) is due now.
  virtual void queued() {}
  /// Keeps `what` alive as long as the task (a hold on the loom::host_alloc buffers its call
  /// uses, which host_free then frees only when the task is done).
  void keep(std::shared_ptr<void> what) { kept_.push_back(std::move(what)); }
  /// Lets go of what keep() kept (a finished task made ready for another call).
  void release_kept() { kept_.clear(); }

 private:
  std::vector<std::shared_ptr<void>> kept_;
};

}  // namespace loom::exec
