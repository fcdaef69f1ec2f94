#include "netns.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "fd.hpp"
#include "output.hpp"

namespace loom::run {
namespace {

constexpr const char* kNetnsDir = "/var/run/netns";

// `program` ("ip", "tc") from PATH, argv `args`, stdout and stderr captured.
std::string capture(const std::string& program, const std::vector<std::string>& args, int& status) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    status = -1;
    return std::string("pipe: ") + std::strerror(errno);
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    ::dup2(fds[1], STDERR_FILENO);
    std::vector<char*> argv;
    argv.reserve(args.size() + 2);
    std::vector<std::string> copy = args;
    copy.insert(copy.begin(), program);
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execvp(program.c_str(), argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  std::string out;
  char buf[512];
  for (;;) {
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  status = -1;
  if (pid > 0)
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  return out;
}

bool pid_alive(long pid) {
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

// Namespaces "loom-PID-..." whose loomrun is gone (killed with SIGKILL, say).
void remove_stale() {
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(kNetnsDir), &::closedir);
  if (!dir) return;
  std::vector<std::string> stale;
  while (dirent* e = ::readdir(dir.get())) {
    std::string n = e->d_name;
    if (n.rfind("loom-", 0) != 0) continue;
    long pid = std::strtol(n.c_str() + 5, nullptr, 10);
    if (pid > 0 && !pid_alive(pid)) stale.push_back(n);
  }
  for (const auto& n : stale) (void)run_ip({"netns", "del", n});
}

}  // namespace

std::string run_program(const std::string& program, const std::vector<std::string>& args) {
  int status = 0;
  std::string out = capture(program, args, status);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  std::string cmd = program;
  for (const auto& a : args) cmd += " " + a;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return "'" + cmd + "' failed: " + (out.empty() ? "exit status " + std::to_string(status) : out);
}

std::string run_ip(const std::vector<std::string>& args) {
  return run_program("ip", args);
}

std::string namespaces_unsupported() {
  if (::geteuid() != 0) return "--hosts needs root (it creates network namespaces)";
  int status = 0;
  (void)capture("ip", {"-V"}, status);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return "--hosts needs the 'ip' command (Debian package iproute2)";
  return "";
}

HostNamespaces::HostNamespaces(int hosts, const HostNetwork& net) {
  if (std::string why = namespaces_unsupported(); !why.empty()) throw RunError(why);
  remove_stale();
  prefix_ = "loom-" + std::to_string(::getpid()) + "-";
  switch_ = prefix_ + "sw";
  for (int h = 0; h < hosts; ++h) names_.push_back(prefix_ + "h" + std::to_string(h));
  auto must_run = [&](const std::string& program, const std::vector<std::string>& args) {
    std::string err = run_program(program, args);
    if (err.empty()) return;
    remove();
    throw RunError("creating network namespaces for --hosts: " + err);
  };
  auto must = [&](const std::vector<std::string>& args) { must_run("ip", args); };
  auto add_ns = [&](const std::string& n) {
    must({"netns", "add", n});
    created_.push_back(n);
    must({"-n", n, "link", "set", "lo", "up"});
  };
  add_ns(switch_);
  for (int i = 0; i < net.nics; ++i) {
    const std::string br = "br" + std::to_string(i);
    must({"-n", switch_, "link", "add", br, "type", "bridge"});
    must({"-n", switch_, "link", "set", br, "up"});
  }
  for (int h = 0; h < hosts; ++h) {
    const std::string& n = names_[static_cast<std::size_t>(h)];
    add_ns(n);
    for (int i = 0; i < net.nics; ++i) {
      // Switch ports p<h> (eth0, as before --nics) and p<h>n<i>.
      const std::string port = "p" + std::to_string(h) + (i > 0 ? "n" + std::to_string(i) : "");
      const std::string eth = "eth" + std::to_string(i);
      must({"-n", switch_, "link", "add", port, "type", "veth", "peer", "name", eth, "netns", n});
      must({"-n", switch_, "link", "set", port, "master", "br" + std::to_string(i), "up"});
      must({"-n", n, "addr", "add", address(h, i) + "/24", "dev", eth});
      must({"-n", n, "link", "set", eth, "up"});
      if (!net.rate.empty())
        must_run("tc", {"-n", n, "qdisc", "add", "dev", eth, "root", "tbf", "rate", net.rate,
                        "burst", "1mb", "latency", "100ms"});
    }
  }
}

HostNamespaces::~HostNamespaces() {
  remove();
}

void HostNamespaces::remove() noexcept {
  try {
    for (auto it = created_.rbegin(); it != created_.rend(); ++it) {
      std::string err = run_ip({"netns", "del", *it});
      if (!err.empty()) report("warning: " + err);
    }
  } catch (...) {  // never throws: best effort
  }
  created_.clear();
}

const std::string& HostNamespaces::name(int host) const {
  return names_.at(static_cast<std::size_t>(host));
}

std::string HostNamespaces::address(int host, int nic) {
  return "10.199." + std::to_string(nic) + "." + std::to_string(host + 1);
}

}  // namespace loom::run
