#include "signals.hpp"

#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace loom::run {

SignalWatcher::SignalWatcher() {
  sigset_t mask;
  sigemptyset(&mask);
  for (int sig : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&mask, sig);
  if (sigprocmask(SIG_BLOCK, &mask, &old_mask_) != 0) throw_os_error("sigprocmask");
  fd_.reset(::signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC));
  if (!fd_.valid()) throw_os_error("signalfd");
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  if (sigaction(SIGPIPE, &ignore, &old_pipe_action_) != 0) throw_os_error("sigaction(SIGPIPE)");
}

SignalWatcher::~SignalWatcher() {
  sigaction(SIGPIPE, &old_pipe_action_, nullptr);
  fd_.reset();
  sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
}

std::vector<int> SignalWatcher::take_pending() {
  std::vector<int> signals;
  signalfd_siginfo info{};
  for (;;) {
    ssize_t n = ::read(fd_.get(), &info, sizeof info);
    if (n == static_cast<ssize_t>(sizeof info)) {
      signals.push_back(static_cast<int>(info.ssi_signo));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN) throw_os_error("read signalfd");
    return signals;
  }
}

void SignalWatcher::restore_in_child() const noexcept {
  sigaction(SIGPIPE, &old_pipe_action_, nullptr);
  sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
}

bool is_stop_signal(int sig) noexcept {
  return sig == SIGINT || sig == SIGTERM || sig == SIGHUP;
}

std::string signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    case SIGKILL: return "SIGKILL";
    case SIGCHLD: return "SIGCHLD";
    default: return "signal " + std::to_string(sig);
  }
}

}  // namespace loom::run
