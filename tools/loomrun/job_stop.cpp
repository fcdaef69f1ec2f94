// How a job ends early: a failed rank, --timeout, or a signal to loomrun.
#include <csignal>

#include "job.hpp"
#include "process.hpp"

namespace loom::run {
namespace {

std::string ranks_text(int n) {
  return std::to_string(n) + (n == 1 ? " rank" : " ranks");
}

std::string duration_text(std::chrono::milliseconds d) {
  if (d.count() % 1000 == 0) return std::to_string(d.count() / 1000) + "s";
  return std::to_string(d.count()) + "ms";
}

}  // namespace

void Job::begin_stop(int exit_code, int sig, const std::string& why) {
  if (exit_code_ == kExitOk) exit_code_ = exit_code;
  if (phase_ != Phase::Running) return;
  phase_ = Phase::Stopping;
  timeout_at_.reset();
  int remaining = running_count();
  if (remaining == 0) return;
  if (options_.grace.count() == 0) {
    kill_remaining(why + ": killing the " + ranks_text(remaining) + " left");
    return;
  }
  report(why + ": sending " + signal_name(sig) + " to the " + ranks_text(remaining) + " left");
  for (const Rank& rank : ranks_)
    if (rank.running) signal_group(rank.pid, sig);
  kill_at_ = Clock::now() + options_.grace;
}

void Job::kill_remaining(const std::string& why) {
  phase_ = Phase::Killing;
  kill_at_.reset();
  if (running_count() == 0) return;
  report(why);
  for (const Rank& rank : ranks_)
    if (rank.running) signal_group(rank.pid, SIGKILL);
}

void Job::on_stop_signal(int sig) {
  if (running_count() == 0) {
    drain_until_ = Clock::now();  // only output is left: stop waiting for it
    if (exit_code_ == kExitOk) exit_code_ = kExitSignalBase + sig;
    return;
  }
  if (phase_ == Phase::Running) {
    begin_stop(kExitSignalBase + sig, sig, "got " + signal_name(sig));
  } else {
    kill_remaining("got " + signal_name(sig) + " again: killing the " +
                   ranks_text(running_count()) + " left");
  }
}

void Job::check_deadlines() {
  const auto now = Clock::now();
  if (timeout_at_ && now >= *timeout_at_) {
    timeout_at_.reset();
    if (running_count() > 0)
      begin_stop(kExitTimeout, SIGTERM,
                 "timeout: the job ran longer than " + duration_text(*options_.timeout));
  }
  if (kill_at_ && now >= *kill_at_) {
    kill_at_.reset();
    kill_remaining(ranks_text(running_count()) + " still running " + duration_text(options_.grace) +
                   " later: sending SIGKILL");
  }
  if (drain_until_ && now >= *drain_until_) {
    drain_until_.reset();
    if (streams_open()) {
      report("not waiting for output from processes the ranks left running");
      close_streams();
    }
  }
}

void Job::close_streams() {
  for (Rank& rank : ranks_) {
    for (std::optional<Stream>* s : {&rank.out, &rank.err}) {
      if (!*s || !(*s)->fd.valid()) continue;
      read_stream(**s, true);
      (*s)->lines.finish();
      (*s)->fd.reset();
    }
  }
}

}  // namespace loom::run
