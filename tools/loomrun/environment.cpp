#include "environment.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <string_view>

#include "fd.hpp"

extern char** environ;  // NOLINT(readability-redundant-declaration)

namespace loom::run {
namespace {

std::string_view name_of(std::string_view entry) {
  return entry.substr(0, entry.find('='));
}

bool is_set_by(const std::vector<std::string>& assignments, std::string_view name) {
  for (const std::string& a : assignments)
    if (name_of(a) == name) return true;
  return false;
}

}  // namespace

int find_free_port() {
  UniqueFd sock(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!sock.valid()) throw_os_error("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(sock.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    throw_os_error("bind 127.0.0.1:0");
  socklen_t len = sizeof addr;
  if (::getsockname(sock.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throw_os_error("getsockname");
  return ntohs(addr.sin_port);
}

std::string random_secret_hex() {
  UniqueFd urandom(::open("/dev/urandom", O_RDONLY | O_CLOEXEC));
  if (!urandom.valid()) throw_os_error("open /dev/urandom");
  std::array<unsigned char, 16> bytes{};
  std::size_t got = 0;
  while (got < bytes.size()) {
    ssize_t n = ::read(urandom.get(), bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw_os_error("read /dev/urandom");
    got += static_cast<std::size_t>(n);
  }
  static constexpr std::string_view kHex = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 0xf];
  }
  return out;
}

JobIdentity make_job_identity(const Options& options) {
  JobIdentity job;
  job.root = options.root.empty() ? "127.0.0.1:" + std::to_string(find_free_port()) : options.root;
  job.secret = random_secret_hex();
  return job;
}

std::vector<std::string> rank_environment(const Options& options, const JobIdentity& job,
                                          int rank) {
  const std::string n = std::to_string(options.nranks);
  const std::string r = std::to_string(rank);
  auto [local_rank, local_size] = local_rank_of(options, rank);
  std::vector<std::string> set = {
      "LOOM_RANK=" + r,
      "LOOM_WORLD_SIZE=" + n,
      "LOOM_LOCAL_RANK=" + std::to_string(local_rank),
      "LOOM_LOCAL_SIZE=" + std::to_string(local_size),
      "LOOM_ROOT=" + job.root,
      "LOOM_SECRET=" + job.secret,
  };
  if (!job.host_ids.empty())
    set.push_back("LOOM_HOST_ID=" + job.host_ids[static_cast<std::size_t>(host_of(options, rank))]);
  // -x wins over loomrun's own values (options.cpp refuses the rank-identity ones).
  for (const auto& assignment : options.extra_env) {
    const std::string& name = assignment.first;
    std::erase_if(set, [&name](const std::string& a) { return name_of(a) == name; });
    set.push_back(name);
    set.back().append("=").append(assignment.second);
  }
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view name = name_of(*e);
    if (name == "LOOM_ID" || is_set_by(set, name)) continue;  // a stale job id would win
    env.emplace_back(*e);
  }
  env.insert(env.end(), set.begin(), set.end());
  return env;
}

}  // namespace loom::run
