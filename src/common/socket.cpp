#include "common/socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <thread>

#include "common/diag.hpp"

namespace loom::net {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kFirstBackoff{1};
constexpr milliseconds kMaxBackoff{100};
constexpr int kPollCapMs = 1000;  // poll slices when the deadline is "never"

Result<std::uint16_t> parse_port(std::string_view text, std::string_view whole) {
  unsigned value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || value > 65535) {
    return make_error(ErrorCode::InvalidArgument, "invalid port '{}' in address '{}'", text, whole);
  }
  return static_cast<std::uint16_t>(value);
}

}  // namespace

// "host:port", "[v6]:port", "[v6]", "v6" (two or more colons, no port), "host".
Result<HostPort> parse_host_port(std::string_view s) {
  HostPort out;
  if (s.empty()) return make_error(ErrorCode::InvalidArgument, "empty address");
  std::string_view port_text;
  bool has_port = false;
  if (s.front() == '[') {
    auto close = s.find(']');
    if (close == std::string_view::npos) {
      return make_error(ErrorCode::InvalidArgument, "unterminated '[' in address '{}'", s);
    }
    out.host = std::string(s.substr(1, close - 1));
    std::string_view rest = s.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') {
        return make_error(ErrorCode::InvalidArgument, "junk after ']' in address '{}'", s);
      }
      port_text = rest.substr(1);
      has_port = true;
    }
  } else if (auto colon = s.find(':');
             colon != std::string_view::npos && std::count(s.begin(), s.end(), ':') == 1) {
    out.host = std::string(s.substr(0, colon));
    port_text = s.substr(colon + 1);
    has_port = true;
  } else {
    out.host = std::string(s);  // a name, an IPv4 address or a bare IPv6 literal
  }
  if (out.host.empty()) return make_error(ErrorCode::InvalidArgument, "no host in address '{}'", s);
  if (has_port) {
    LOOM_ASSIGN_OR_RETURN(out.port, parse_port(port_text, s));
    out.has_port = true;
  }
  return out;
}

namespace {

bool retryable_connect_error(int err) {
  switch (err) {
    case ECONNREFUSED:
    case ETIMEDOUT:
    case ENETUNREACH:
    case EHOSTUNREACH:
    case ECONNRESET:
    case ECONNABORTED:
    case EAGAIN:
    case EADDRNOTAVAIL:
    case ENETDOWN:
    case EHOSTDOWN:
    case EINTR: return true;
    default: return false;
  }
}

// Waits for `events` on `fd`; returns the poll result (0 on timeout), retrying EINTR.
Result<int> poll_one(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  for (;;) {
    int rc = ::poll(&p, 1, timeout_ms);
    if (rc >= 0) return rc;
    if (errno != EINTR) return system_error(errno, "poll");
  }
}

enum class Attempt { Connected, Retry, Expired };

// One non-blocking connect attempt, bounded by `deadline`. On Retry, `*err` is the errno.
Result<Attempt> connect_once(const SocketAddress& addr, const SocketAddress* from,
                             Deadline deadline, Fd* out, int* err) {
  Fd fd(::socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return system_error(errno, "socket");
  if (from != nullptr) {  // leave through this local address (its port: 0, any)
    SocketAddress src = *from;
    src.set_port(0);
    if (::bind(fd.get(), src.raw(), src.len) != 0)
      return system_error(errno,
                          "bind to " + src.to_string() + " to connect to " + addr.to_string());
  }
  int rc = ::connect(fd.get(), addr.raw(), addr.len);
  if (rc != 0 && errno != EINPROGRESS && errno != EINTR) {
    *err = errno;
    if (retryable_connect_error(errno)) return Attempt::Retry;
    return system_error(errno, "connect to " + addr.to_string());
  }
  if (rc != 0) {
    for (;;) {
      LOOM_ASSIGN_OR_RETURN(int ready,
                            poll_one(fd.get(), POLLOUT, deadline.poll_timeout_ms(kPollCapMs)));
      if (ready > 0) break;
      if (deadline.expired()) return Attempt::Expired;
    }
    int so_error = 0;
    socklen_t len = sizeof so_error;
    if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &so_error, &len) != 0) {
      return system_error(errno, "getsockopt(SO_ERROR)");
    }
    if (so_error != 0) {
      *err = so_error;
      if (retryable_connect_error(so_error)) return Attempt::Retry;
      return system_error(so_error, "connect to " + addr.to_string());
    }
  }
  // A loopback connect to a port nobody listens on can "succeed" by connecting to itself when
  // the kernel picks the target as the source port (TCP simultaneous open). Treat it as refused.
  auto local = bound_address(fd.get());
  if (local.is_ok() && same_endpoint(local.value(), addr)) {
    *err = ECONNREFUSED;
    return Attempt::Retry;
  }
  LOOM_RETURN_IF_ERROR(set_nonblocking(fd.get(), false));
  LOOM_RETURN_IF_ERROR(set_nodelay(fd.get()));
  *out = std::move(fd);
  return Attempt::Connected;
}

Status peer_failed(std::string_view what, std::size_t done, std::size_t len, int err) {
  if (err == 0) {
    return make_error(ErrorCode::PeerFailed, "{}: peer closed the connection ({} of {} bytes)",
                      what, done, len);
  }
  return make_error(ErrorCode::PeerFailed, "{}: {} ({} of {} bytes)", what, std::strerror(err),
                    done, len);
}

bool peer_gone_error(int err) {
  return err == ECONNRESET || err == EPIPE || err == ENOTCONN || err == ETIMEDOUT ||
         err == ECONNABORTED || err == EHOSTUNREACH || err == ENETUNREACH;
}

// Shared loop of send_all / recv_all. `io` performs one non-blocking transfer attempt.
template <typename Io>
Status transfer_all(int fd, std::size_t len, Deadline deadline, std::string_view what, short events,
                    Io io) {
  std::size_t done = 0;
  while (done < len) {
    ssize_t n = io(done);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      continue;
    }
    if (n == 0) return peer_failed(what, done, len, 0);
    int err = errno;
    if (err == EINTR) continue;
    if (err != EAGAIN && err != EWOULDBLOCK) {
      if (peer_gone_error(err)) return peer_failed(what, done, len, err);
      return system_error(err, std::string(what));
    }
    if (deadline.expired()) {
      return make_error(ErrorCode::Timeout, "{}: timed out ({} of {} bytes transferred)", what,
                        done, len);
    }
    auto polled = poll_one(fd, events, deadline.poll_timeout_ms(kPollCapMs));
    if (!polled.is_ok()) return polled.status();
  }
  return Status::ok();
}

}  // namespace

std::uint16_t SocketAddress::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
  if (family() == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
  }
  return 0;
}

void SocketAddress::set_port(std::uint16_t p) {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&storage)->sin_port = htons(p);
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port = htons(p);
}

std::string SocketAddress::to_string() const {
  char host[INET6_ADDRSTRLEN] = {0};
  if (family() == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr, host,
                sizeof host);
    return fmt::format("{}:{}", host, port());
  }
  if (family() == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&storage);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    if (in6->sin6_scope_id != 0) {
      char ifname[IF_NAMESIZE] = {0};
      if (::if_indextoname(in6->sin6_scope_id, ifname) != nullptr) {
        return fmt::format("[{}%{}]:{}", host, ifname, port());
      }
    }
    return fmt::format("[{}]:{}", host, port());
  }
  return "<unknown address>";
}

Result<SocketAddress> resolve(std::string_view host_port) {
  LOOM_ASSIGN_OR_RETURN(HostPort hp, parse_host_port(host_port));
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* list = nullptr;
  std::string port = std::to_string(hp.port);
  int rc = ::getaddrinfo(hp.host.c_str(), port.c_str(), &hints, &list);
  if (rc != 0) {
    auto code = (rc == EAI_NONAME || rc == EAI_FAMILY) ? ErrorCode::InvalidArgument
                                                       : ErrorCode::SystemError;
    return make_error(code, "cannot resolve '{}': {}", hp.host,
                      rc == EAI_SYSTEM ? std::strerror(errno) : ::gai_strerror(rc));
  }
  // Prefer IPv4 so that every rank resolving a dual-stack name picks the same family.
  const addrinfo* pick = nullptr;
  for (const addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6) continue;
    if (pick == nullptr || (ai->ai_family == AF_INET && pick->ai_family != AF_INET)) pick = ai;
  }
  SocketAddress out;
  if (pick != nullptr && pick->ai_addrlen <= sizeof out.storage) {
    std::memcpy(&out.storage, pick->ai_addr, pick->ai_addrlen);
    out.len = pick->ai_addrlen;
  }
  ::freeaddrinfo(list);
  if (out.len == 0) {
    return make_error(ErrorCode::InvalidArgument, "'{}' has no IPv4 or IPv6 address", hp.host);
  }
  return out;
}

Result<SocketAddress> local_address_towards(const SocketAddress& remote) {
  Fd fd(::socket(remote.family(), SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return system_error(errno, "socket(SOCK_DGRAM)");
  SocketAddress target = remote;
  if (target.port() == 0) target.set_port(9);  // any port: a UDP connect sends nothing
  if (::connect(fd.get(), target.raw(), target.len) != 0) {
    return system_error(errno, "no route to " + remote.to_string());
  }
  LOOM_ASSIGN_OR_RETURN(SocketAddress local, bound_address(fd.get()));
  local.set_port(0);
  return local;
}

bool same_endpoint(const SocketAddress& a, const SocketAddress& b) {
  return a.len == b.len && std::memcmp(&a.storage, &b.storage, a.len) == 0;
}

Result<SocketAddress> interface_address(std::string_view ifname) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return system_error(errno, "getifaddrs");
  SocketAddress out;
  for (const ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr || ifname != ifa->ifa_name) continue;
    int fam = ifa->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6) continue;
    if (out.len != 0 && (out.family() == AF_INET || fam == AF_INET6)) continue;
    out.len = fam == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    std::memcpy(&out.storage, ifa->ifa_addr, out.len);
  }
  ::freeifaddrs(list);
  if (out.len == 0) {
    return make_error(ErrorCode::InvalidArgument,
                      "network interface '{}' does not exist or has no IP address", ifname);
  }
  out.set_port(0);
  return out;
}

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    reset();
    fd_ = o.release();
  }
  return *this;
}

Fd::~Fd() {
  reset();
}

int Fd::release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);  // never retry close(2) on EINTR: the fd is gone on Linux
  fd_ = -1;
}

Result<Fd> listen_on(const SocketAddress& addr, int backlog) {
  Fd fd(::socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return system_error(errno, "socket");
  int one = 1;
  if (::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) {
    return system_error(errno, "setsockopt(SO_REUSEADDR)");
  }
  if (::bind(fd.get(), addr.raw(), addr.len) != 0) {
    return system_error(errno, "bind to " + addr.to_string());
  }
  if (::listen(fd.get(), backlog) != 0) return system_error(errno, "listen on " + addr.to_string());
  return fd;
}

Result<SocketAddress> bound_address(int fd) {
  SocketAddress out;
  out.len = sizeof out.storage;
  if (::getsockname(fd, out.raw(), &out.len) != 0) return system_error(errno, "getsockname");
  return out;
}

Result<Fd> connect_with_retry(const SocketAddress& addr, Deadline deadline) {
  return connect_with_retry(addr, nullptr, deadline);
}

Result<Fd> connect_with_retry(const SocketAddress& addr, const SocketAddress* from,
                              Deadline deadline) {
  const auto start = Clock::now();
  milliseconds backoff = kFirstBackoff;
  int last_err = 0;
  int attempts = 0;
  for (;;) {
    Fd fd;
    ++attempts;
    LOOM_ASSIGN_OR_RETURN(Attempt a, connect_once(addr, from, deadline, &fd, &last_err));
    if (a == Attempt::Connected) {
      if (diag::enabled(diag::Level::Debug))
        diag::emit(diag::Level::Debug,
                   fmt::format("connected to {} after {} attempt(s)", addr.to_string(), attempts));
      return fd;
    }
    if (a == Attempt::Expired || deadline.expired()) break;
    auto left = deadline.at() - Clock::now();
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, left));
    backoff = std::min(backoff * 2, kMaxBackoff);
    if (deadline.expired()) break;
  }
  auto waited = std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
  return make_error(
      ErrorCode::Timeout, "connect to {}: timed out after {} ms, {} attempt(s){}", addr.to_string(),
      waited, attempts,
      last_err != 0 ? fmt::format(" (last error: {})", std::strerror(last_err)) : std::string());
}

Result<Fd> accept_until(int listen_fd, Deadline deadline) {
  for (;;) {
    Fd fd(::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC));
    if (fd.valid()) {
      LOOM_RETURN_IF_ERROR(set_nodelay(fd.get()));
      return fd;
    }
    int err = errno;
    if (err != EAGAIN && err != EWOULDBLOCK && err != EINTR && err != ECONNABORTED) {
      return system_error(err, "accept");
    }
    if (deadline.expired()) return make_error(ErrorCode::Timeout, "accept: timed out");
    LOOM_ASSIGN_OR_RETURN(int ready,
                          poll_one(listen_fd, POLLIN, deadline.poll_timeout_ms(kPollCapMs)));
    (void)ready;
  }
}

Status set_nonblocking(int fd, bool on) {
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0) return system_error(errno, "fcntl(F_GETFL)");
  int want = on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (want != flags && ::fcntl(fd, F_SETFL, want) != 0)
    return system_error(errno, "fcntl(F_SETFL)");
  return Status::ok();
}

Status set_nodelay(int fd) {
  int one = 1;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) {
    return system_error(errno, "setsockopt(TCP_NODELAY)");
  }
  return Status::ok();
}

Status set_buffer_sizes(int fd, std::size_t bytes) {
  if (bytes == 0) return Status::ok();
  int v = static_cast<int>(std::min<std::size_t>(bytes, 1u << 30));
  if (::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof v) != 0) {
    return system_error(errno, "setsockopt(SO_SNDBUF)");
  }
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof v) != 0) {
    return system_error(errno, "setsockopt(SO_RCVBUF)");
  }
  return Status::ok();
}

Status send_all(int fd, const void* data, std::size_t len, Deadline deadline,
                std::string_view what) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  return transfer_all(fd, len, deadline, what, POLLOUT, [&](std::size_t done) {
    return ::send(fd, p + done, len - done, MSG_NOSIGNAL | MSG_DONTWAIT);
  });
}

Status recv_all(int fd, void* data, std::size_t len, Deadline deadline, std::string_view what) {
  auto* p = static_cast<std::uint8_t*>(data);
  return transfer_all(fd, len, deadline, what, POLLIN, [&](std::size_t done) {
    return ::recv(fd, p + done, len - done, MSG_DONTWAIT);
  });
}

std::string host_name() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown-host";
  return buf;
}

}  // namespace loom::net
