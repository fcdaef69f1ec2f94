#include "job.hpp"

#include <poll.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cerrno>

#include "process.hpp"
#include "topology/cpu_binding.hpp"

namespace loom::run {

void read_stream(Stream& stream, bool until_empty) {
  static std::array<char, std::size_t{64} * 1024> buf;  // loomrun is single-threaded
  while (stream.fd.valid()) {
    ssize_t n = ::read(stream.fd.get(), buf.data(), buf.size());
    if (n > 0) {
      stream.lines.feed(std::string_view(buf.data(), static_cast<std::size_t>(n)));
      if (!until_empty) return;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n < 0) report(os_error_text("reading a rank's output", errno));
    stream.lines.finish();  // end of stream (or an unreadable one)
    stream.fd.reset();
  }
}

Job::Job(const Options& options, const JobIdentity& identity)
    : options_(options), identity_(identity) {}

Job::~Job() {
  for (const Rank& rank : ranks_)
    if (rank.running) signal_group(rank.pid, SIGKILL);
}

int Job::run() {
  start_ranks();
  while (running_count() > 0 || streams_open()) {
    poll_once();
    check_deadlines();
  }
  return exit_code_;
}

void Job::start_ranks() {
  ensure_fd_limit(2 * static_cast<std::size_t>(options_.nranks) + 32);
  if (options_.cpu_bind == CpuBind::Block) {
    bindings_ = topo::block_binding(topo::allowed_cores(), options_.nranks);
    if (bindings_.empty() || bindings_[0].empty()) {
      report("warning: cannot tell which cores this machine has; the ranks are not bound");
      bindings_.clear();
    }
  }
  ranks_.reserve(static_cast<std::size_t>(options_.nranks));
  for (int r = 0; r < options_.nranks; ++r) {
    try {
      start_rank(r);
    } catch (const RunError& e) {
      report("error: cannot start rank " + std::to_string(r) + ": " + e.what());
      begin_stop(kExitFailed, SIGTERM, "stopping the ranks already started");
      break;
    }
  }
  if (options_.timeout && phase_ == Phase::Running) timeout_at_ = Clock::now() + *options_.timeout;
}

void Job::start_rank(int index) {
  LaunchSpec spec;
  spec.rank = index;
  spec.argv = options_.command;
  spec.env = rank_environment(options_, identity_, index);
  spec.discard_stdout = options_.only_rank && *options_.only_rank != index;
  if (!identity_.host_ids.empty())
    spec.netns = identity_.host_ids[static_cast<std::size_t>(host_of(options_, index))];
  if (!bindings_.empty()) spec.cpus = bindings_[static_cast<std::size_t>(index)];
  RankProcess process = spawn_rank(spec, signals_);
  std::string prefix = options_.prefix ? "[" + std::to_string(index) + "] " : "";
  Rank rank;
  rank.index = index;
  rank.pid = process.pid;
  rank.running = true;
  if (process.out.valid())
    rank.out.emplace(Stream{std::move(process.out), LineSplitter(prefix, &out_, options_.prefix)});
  rank.err.emplace(Stream{std::move(process.err), LineSplitter(prefix, &err_, options_.prefix)});
  ranks_.push_back(std::move(rank));
}

void Job::poll_once() {
  std::vector<pollfd> fds;
  std::vector<Stream*> streams;
  fds.push_back({signals_.fd(), POLLIN, 0});
  for (Rank& rank : ranks_) {
    for (std::optional<Stream>* s : {&rank.out, &rank.err}) {
      if (!*s || !(*s)->fd.valid()) continue;
      fds.push_back({(*s)->fd.get(), POLLIN, 0});
      streams.push_back(&**s);
    }
  }
  int n = ::poll(fds.data(), fds.size(), poll_timeout_ms());
  if (n < 0 && errno == EINTR) return;
  if (n < 0) throw_os_error("poll");
  // Output first, so that a rank's last lines come before loomrun's words about its end.
  for (std::size_t i = 0; i < streams.size(); ++i)
    if (fds[i + 1].revents != 0) read_stream(*streams[i], false);
  if (fds[0].revents != 0) handle_signals();
}

int Job::poll_timeout_ms() const {
  std::optional<Clock::time_point> next;
  for (const auto& deadline : {timeout_at_, kill_at_, drain_until_})
    if (deadline && (!next || *deadline < *next)) next = deadline;
  if (!next) return -1;
  auto left = std::chrono::ceil<std::chrono::milliseconds>(*next - Clock::now()).count();
  constexpr decltype(left) kMaxWaitMs = 3'600'000;  // poll again at least once an hour
  return static_cast<int>(std::clamp<decltype(left)>(left, 0, kMaxWaitMs));
}

void Job::handle_signals() {
  for (int sig : signals_.take_pending())
    if (is_stop_signal(sig)) on_stop_signal(sig);
  reap_children();  // whatever woke us: cheap, and never misses a SIGCHLD
}

void Job::reap_children() {
  for (;;) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid < 0 && errno == EINTR) continue;
    if (pid <= 0) return;  // none left to reap now (0) or no children at all (ECHILD)
    for (Rank& rank : ranks_)
      if (rank.running && rank.pid == pid) on_rank_exit(rank, status);
  }
}

void Job::on_rank_exit(Rank& rank, int status) {
  rank.running = false;
  // Whatever the rank left behind in its process group ends with it. Right after the reap the
  // group id cannot have been reused: it is either still this group or no group at all.
  signal_group(rank.pid, SIGKILL);
  for (std::optional<Stream>* s : {&rank.out, &rank.err})
    if (*s) read_stream(**s, true);
  if (!succeeded(status) && phase_ == Phase::Running) {
    report("rank " + std::to_string(rank.index) + " (pid " + std::to_string(rank.pid) + ") " +
           describe_wait_status(status));
    begin_stop(kExitFailed, SIGTERM, "stopping the job");
  }
  if (running_count() == 0 && streams_open()) drain_until_ = Clock::now() + options_.grace;
}

int Job::running_count() const {
  int n = 0;
  for (const Rank& rank : ranks_) n += rank.running ? 1 : 0;
  return n;
}

bool Job::streams_open() const {
  for (const Rank& rank : ranks_)
    for (const std::optional<Stream>* s : {&rank.out, &rank.err})
      if (*s && (*s)->fd.valid()) return true;
  return false;
}

}  // namespace loom::run
