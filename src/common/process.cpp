#include "common/process.hpp"

#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <fstream>
#include <sstream>
#include <string>

namespace loom::proc {

std::uint64_t own_pid_namespace() {
  struct stat st {};
  if (::stat("/proc/self/ns/pid", &st) != 0) return 0;
  return static_cast<std::uint64_t>(st.st_ino);
}

std::optional<ProcessStat> read_process_stat(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(f, line)) return std::nullopt;
  // Field 2 is the command in parentheses (which may hold spaces and parentheses itself); field
  // 3 is the state, field 22 the start time.
  auto close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(line.substr(close + 1));
  std::string field;
  ProcessStat st;
  for (int i = 3; i <= 22; ++i) {
    if (!(rest >> field)) return std::nullopt;
    if (i == 3) st.state = field[0];
  }
  try {
    st.start = std::stoull(field);
  } catch (...) {
    return std::nullopt;
  }
  return st;
}

std::uint64_t process_start_time(pid_t pid) {
  auto st = read_process_stat(pid);
  return st ? st->start : 0;
}

PeerProcess PeerProcess::watch(pid_t pid, std::uint64_t pid_ns) {
  PeerProcess p;
  p.pid_ = pid;
  std::uint64_t own = own_pid_namespace();
  if (pid <= 0 || pid == ::getpid() || own == 0 || pid_ns != own) return p;
  p.watching_ = true;
#ifdef SYS_pidfd_open
  p.pidfd_ = net::Fd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
#endif
  // Without a pidfd (old kernel, seccomp), alive() falls back to kill(pid, 0).
  return p;
}

bool PeerProcess::alive() const {
  if (!watching_) return true;
  if (pidfd_.valid()) {
    pollfd p{pidfd_.get(), POLLIN, 0};
    return ::poll(&p, 1, 0) != 1;  // readable: exited
  }
  // Note: a zombie (exited, not yet reaped by its parent) still counts as alive here.
  return !(::kill(pid_, 0) != 0 && errno == ESRCH);
}

}  // namespace loom::proc
