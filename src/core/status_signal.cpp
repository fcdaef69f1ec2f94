#include "core/status_signal.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <system_error>
#include <thread>

#include "core/comm_impl.hpp"
#include "log/log.hpp"

namespace loom::detail {
namespace {

struct Registry {
  std::mutex mu;
  std::set<const CommImpl*> comms;
  bool installed = false;  // or refused: tried once
};

// Never destroyed: the printing thread may run during static destruction.
Registry& registry() {
  static auto* r = new Registry;
  return *r;
}

std::atomic<int> g_pipe_write{-1};

extern "C" void on_status_signal(int /*signo*/) {
  const int saved = errno;
  const int fd = g_pipe_write.load(std::memory_order_relaxed);
  if (fd >= 0) {
    const char byte = 1;
    (void)!::write(fd, &byte, 1);  // non-blocking: a full pipe already has a report pending
  }
  errno = saved;
}

void print_all() {
  Registry& r = registry();
  std::lock_guard lk(r.mu);
  std::string out = fmt::format("loom status (pid {}, on SIGUSR1): {} communicator(s)\n",
                                ::getpid(), r.comms.size());
  for (const CommImpl* c : r.comms) {
    const std::string status = c->status();
    out += "  " + status + "\n";
    c->write_flight_record("signal", status);
  }
  std::fputs(out.c_str(), stderr);
  std::fflush(stderr);
}

void print_on_signal(int fd) {
  for (;;) {
    char buf[64];
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      print_all();
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return;
  }
}

}  // namespace

void enable_status_signal() {
  Registry& r = registry();
  std::lock_guard lk(r.mu);
  if (r.installed) return;
  r.installed = true;
  struct sigaction old {};
  if (::sigaction(SIGUSR1, nullptr, &old) != 0) return;
  if ((old.sa_flags & SA_SIGINFO) != 0 || old.sa_handler != SIG_DFL) {
    LOOM_LOG_WARN(Init,
                  "LOOM_STATUS_SIGNAL: SIGUSR1 is already handled or ignored by this process; "
                  "not installing the status report (Communicator::status() still works)");
    return;
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0 || ::fcntl(fds[1], F_SETFL, O_NONBLOCK) != 0) {
    LOOM_LOG_WARN(Init, "LOOM_STATUS_SIGNAL: pipe: {}", std::strerror(errno));
    return;
  }
  try {
    std::thread(print_on_signal, fds[0]).detach();
  } catch (const std::system_error& e) {
    LOOM_LOG_WARN(Init, "LOOM_STATUS_SIGNAL: cannot start the printing thread: {}", e.what());
    ::close(fds[0]);
    ::close(fds[1]);
    return;
  }
  g_pipe_write.store(fds[1]);
  struct sigaction sa {};
  sa.sa_handler = on_status_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  (void)::sigaction(SIGUSR1, &sa, nullptr);
  LOOM_LOG_INFO(Init, "LOOM_STATUS_SIGNAL: kill -USR1 {} prints the status of every communicator",
                ::getpid());
}

void register_for_status(const CommImpl* comm) {
  Registry& r = registry();
  std::lock_guard lk(r.mu);
  r.comms.insert(comm);
}

void unregister_for_status(const CommImpl* comm) {
  Registry& r = registry();
  std::lock_guard lk(r.mu);
  r.comms.erase(comm);
}

}  // namespace loom::detail
