// One loomrun job: the ranks, their output, and the event loop that waits for them.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "environment.hpp"
#include "fd.hpp"
#include "options.hpp"
#include "output.hpp"
#include "signals.hpp"

namespace loom::run {

/// One output stream of one rank.
struct Stream {
  UniqueFd fd;  // invalid once the stream has ended
  LineSplitter lines;
};

struct Rank {
  int index = 0;
  pid_t pid = -1;  // also the rank's process group
  bool running = false;
  std::optional<Stream> out;  // absent when --only-rank discards this rank's stdout
  std::optional<Stream> err;
};

class Job {
 public:
  Job(const Options& options, const JobIdentity& identity);
  /// Kills whatever is still running (only after an error inside loomrun).
  ~Job();
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  /// Starts the ranks and waits until they have all ended and their output is written.
  /// Returns loomrun's exit code. Throws RunError when loomrun itself fails.
  int run();

 private:
  using Clock = std::chrono::steady_clock;
  enum class Phase { Running, Stopping, Killing };

  void start_ranks();
  void start_rank(int index);
  void poll_once();
  [[nodiscard]] int poll_timeout_ms() const;
  void handle_signals();
  void reap_children();
  void on_rank_exit(Rank& rank, int status);
  void on_stop_signal(int sig);
  void begin_stop(int exit_code, int sig, const std::string& why);
  void kill_remaining(const std::string& why);
  void check_deadlines();
  void close_streams();
  [[nodiscard]] int running_count() const;
  [[nodiscard]] bool streams_open() const;

  const Options& options_;
  const JobIdentity& identity_;
  SignalWatcher signals_;
  Sink out_{STDOUT_FILENO};
  Sink err_{STDERR_FILENO};
  std::vector<Rank> ranks_;
  std::vector<std::vector<int>> bindings_;  // --cpu-bind block: each rank's CPUs
  Phase phase_ = Phase::Running;
  int exit_code_ = kExitOk;
  std::optional<Clock::time_point> timeout_at_;   // --timeout
  std::optional<Clock::time_point> kill_at_;      // SIGKILL after the grace period
  std::optional<Clock::time_point> drain_until_;  // all ranks ended, output pipes still open
};

/// Reads what `stream` has now: one read, or with `until_empty` until the pipe is empty.
/// Writes the complete lines; at end of stream writes the rest and closes the stream.
void read_stream(Stream& stream, bool until_empty);

}  // namespace loom::run
