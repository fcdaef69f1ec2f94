#include "transports/shm/peer_process.hpp"

#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

namespace loom::transport::shm {

std::uint64_t own_pid_namespace() {
  struct stat st {};
  if (::stat("/proc/self/ns/pid", &st) != 0) return 0;
  return static_cast<std::uint64_t>(st.st_ino);
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

}  // namespace loom::transport::shm
