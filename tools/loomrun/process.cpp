#include "process.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "topology/topology.hpp"

extern char** environ;  // NOLINT(readability-redundant-declaration)

namespace loom::run {
namespace {

struct Pipe {
  UniqueFd read;
  UniqueFd write;
};

Pipe make_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw_os_error("pipe");
  Pipe p{UniqueFd(fds[0]), UniqueFd(fds[1])};
  if (::fcntl(p.read.get(), F_SETFL, O_NONBLOCK) != 0) throw_os_error("fcntl(O_NONBLOCK)");
  return p;
}

// A CPU set for sched_setaffinity, built before the fork.
class CpuSet {
 public:
  explicit CpuSet(const std::vector<int>& cpus) {
    if (cpus.empty()) return;
    const int count = *std::max_element(cpus.begin(), cpus.end()) + 1;
    set_ = CPU_ALLOC(count);
    if (set_ == nullptr) throw_os_error("CPU_ALLOC");
    size_ = CPU_ALLOC_SIZE(count);
    CPU_ZERO_S(size_, set_);
    for (int cpu : cpus) CPU_SET_S(static_cast<std::size_t>(cpu), size_, set_);
  }
  ~CpuSet() {
    if (set_ != nullptr) CPU_FREE(set_);
  }
  CpuSet(const CpuSet&) = delete;
  CpuSet& operator=(const CpuSet&) = delete;

  /// Binds the calling process; true when there is nothing to bind.
  [[nodiscard]] bool apply() const {
    return set_ == nullptr || ::sched_setaffinity(0, size_, set_) == 0;
  }

 private:
  cpu_set_t* set_ = nullptr;
  std::size_t size_ = 0;
};

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

void write_stderr(const std::string& text) noexcept {
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(STDERR_FILENO, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

// Runs in the child between fork and exec. loomrun is single-threaded, so the child may use
// the heap; it must not return or throw.
[[noreturn]] void run_child(pid_t parent, const LaunchSpec& spec, const SignalWatcher& signals,
                            const CpuSet& cpus, int out_fd, int err_fd, char** argv, char** envp) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(1);  // loomrun died before the prctl took effect
  int null_in = ::open("/dev/null", O_RDONLY);
  int null_out = spec.discard_stdout ? ::open("/dev/null", O_WRONLY) : -1;
  if (null_in < 0 || ::dup2(null_in, STDIN_FILENO) < 0) ::_exit(127);
  if (::dup2(spec.discard_stdout ? null_out : out_fd, STDOUT_FILENO) < 0) ::_exit(127);
  if (::dup2(err_fd, STDERR_FILENO) < 0) ::_exit(127);
  if (null_in > STDERR_FILENO) ::close(null_in);
  if (null_out > STDERR_FILENO) ::close(null_out);
  if (!spec.netns.empty()) {
    int ns = ::open(("/var/run/netns/" + spec.netns).c_str(), O_RDONLY | O_CLOEXEC);
    if (ns < 0 || ::setns(ns, CLONE_NEWNET) != 0) {
      write_stderr("loomrun: cannot enter network namespace " + spec.netns + ": " +
                   std::strerror(errno) + "\n");
      ::_exit(127);
    }
    ::close(ns);
  }
  if (!cpus.apply()) {
    write_stderr("loomrun: cannot bind rank " + std::to_string(spec.rank) + " to CPUs " +
                 topo::format_cpu_list(spec.cpus) + ": " + std::strerror(errno) +
                 " (run with --cpu-bind none to leave the ranks unbound)\n");
    ::_exit(127);
  }
  signals.restore_in_child();
  environ = envp;  // so that execvp searches the rank's PATH
  ::execvp(argv[0], argv);
  int err = errno;
  write_stderr("loomrun: cannot execute '" + spec.argv[0] + "': " + std::strerror(err) + "\n");
  ::_exit(127);
}

}  // namespace

RankProcess spawn_rank(const LaunchSpec& spec, const SignalWatcher& signals) {
  Pipe out;
  if (!spec.discard_stdout) out = make_pipe();
  Pipe err = make_pipe();
  std::vector<char*> argv = c_strings(spec.argv);
  std::vector<char*> envp = c_strings(spec.env);
  const CpuSet cpus(spec.cpus);
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) throw_os_error("fork for rank " + std::to_string(spec.rank));
  if (pid == 0)
    run_child(parent, spec, signals, cpus, out.write.get(), err.write.get(), argv.data(),
              envp.data());
  // Also set the group here, so that it exists before the parent signals it; EACCES after the
  // child's exec is harmless (the child did it itself).
  ::setpgid(pid, pid);
  return RankProcess{pid, std::move(out.read), std::move(err.read)};
}

void ensure_fd_limit(std::size_t needed) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  if (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= needed) return;
  if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < needed)
    throw RunError("too many ranks: they need " + std::to_string(needed) +
                   " open files and the hard limit is " + std::to_string(limit.rlim_max));
  limit.rlim_cur = needed;
  if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) throw_os_error("setrlimit(RLIMIT_NOFILE)");
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char* what = ::strsignal(sig);
    std::string text = "was killed by signal " + std::to_string(sig) + " (" +
                       (what != nullptr ? what : "unknown") + ")";
    if (WCOREDUMP(status)) text += ", core dumped";
    return text;
  }
  return "ended with wait status " + std::to_string(status);
}

bool succeeded(int status) noexcept {
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

void signal_group(pid_t pgid, int sig) noexcept {
  if (pgid > 0) ::kill(-pgid, sig);
}

}  // namespace loom::run
