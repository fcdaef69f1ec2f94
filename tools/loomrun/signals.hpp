// loomrun's signal handling: SIGCHLD, SIGINT, SIGTERM and SIGHUP are blocked and read from a
// signalfd, so the event loop sees them as readable input; SIGPIPE is ignored so that a closed
// output only loses output.
#pragma once

#include <signal.h>

#include <vector>

#include "fd.hpp"

namespace loom::run {

class SignalWatcher {
 public:
  /// Blocks the signals and opens the signalfd. Throws RunError.
  SignalWatcher();
  /// Restores the signal mask and SIGPIPE's disposition.
  ~SignalWatcher();
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

  [[nodiscard]] int fd() const noexcept { return fd_.get(); }

  /// The signals received since the last call (non-blocking; may be empty).
  std::vector<int> take_pending();

  /// In a forked child before exec: gives back the mask and SIGPIPE disposition loomrun started
  /// with. Async-signal-safe.
  void restore_in_child() const noexcept;

 private:
  UniqueFd fd_;
  sigset_t old_mask_{};
  struct sigaction old_pipe_action_ {};
};

/// True for the signals that ask loomrun to stop the job.
bool is_stop_signal(int sig) noexcept;

/// "SIGINT", "SIGTERM", ... (or "signal N").
std::string signal_name(int sig);

}  // namespace loom::run
