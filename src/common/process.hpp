// What /proc tells of processes: this process's pid namespace, another's state and start time,
// and PeerProcess, which notices when a process on this host has exited (killed, crashed) — which
// shared memory alone never tells: a pidfd (readable once the process exits, even before it is
// reaped, and immune to pid reuse), or kill(pid, 0) where pidfds are unavailable.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>

#include "common/socket.hpp"

namespace loom::proc {

/// Inode of this process's pid namespace (0 if unknown). Pids are comparable only within one.
std::uint64_t own_pid_namespace();
/// What /proc/<pid>/stat says of a process: its state ('R', 'S', ..., 'Z' for a zombie) and
/// when it started, in clock ticks after boot.
struct ProcessStat {
  char state = 0;
  std::uint64_t start = 0;
};
/// Empty if unknown (no such process, or no /proc).
std::optional<ProcessStat> read_process_stat(pid_t pid);
/// When process `pid` started (ProcessStat::start); 0 if unknown.
std::uint64_t process_start_time(pid_t pid);

class PeerProcess {
 public:
  PeerProcess() = default;
  /// Watches `pid` if it is another process in our pid namespace (`pid_ns`); otherwise (the same
  /// process, or a pid we cannot interpret) watches nothing and alive() is always true.
  static PeerProcess watch(pid_t pid, std::uint64_t pid_ns);

  [[nodiscard]] pid_t pid() const { return pid_; }
  /// False once the process has exited. A system call: call it only before blocking.
  [[nodiscard]] bool alive() const;
  /// A descriptor that polls readable when the process exits, or -1.
  [[nodiscard]] int poll_fd() const { return pidfd_.get(); }

 private:
  pid_t pid_ = 0;
  bool watching_ = false;
  net::Fd pidfd_;
};

}  // namespace loom::proc
