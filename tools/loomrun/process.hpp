// Starting one rank: fork, a fresh process group, pipes for its output, exec.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "fd.hpp"
#include "signals.hpp"

namespace loom::run {

struct LaunchSpec {
  int rank = 0;
  std::vector<std::string> argv;  // argv[0] is looked up in the rank's PATH
  std::vector<std::string> env;   // "NAME=VALUE"
  bool discard_stdout = false;    // stdout to /dev/null instead of a pipe
  std::string netns;              // --hosts: the network namespace to run in ("": loomrun's)
  std::vector<int> cpus;          // the CPUs to bind the rank to (empty: loomrun's)
};

struct RankProcess {
  pid_t pid = -1;
  UniqueFd out;  // read end of the rank's stdout (invalid when discarded); non-blocking
  UniqueFd err;  // read end of the rank's stderr; non-blocking
};

/// Forks and execs one rank. The child leads its own process group, dies with loomrun
/// (PR_SET_PDEATHSIG), reads stdin from /dev/null, is bound to `spec.cpus`, and exits 127 with
/// a message on its stderr when the binding or exec fails. Throws RunError when the fork or the
/// pipes fail.
RankProcess spawn_rank(const LaunchSpec& spec, const SignalWatcher& signals);

/// Raises the soft open-file limit when `needed` descriptors would not fit under it.
void ensure_fd_limit(std::size_t needed);

/// "exited with status 3", "was killed by signal 9 (Killed)".
std::string describe_wait_status(int status);

/// True when a waitpid status means a clean exit 0.
bool succeeded(int status) noexcept;

/// Sends `sig` to process group `pgid`; a group that is already gone is not an error.
void signal_group(pid_t pgid, int sig) noexcept;

}  // namespace loom::run
