// Small POSIX socket helpers shared by the bootstrap and the TCP transport. IPv4 and IPv6.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "common/deadline.hpp"
#include "common/status.hpp"

namespace loom::net {

/// True for the errno values that mean "try again" on a non-blocking descriptor (interrupted,
/// or nothing to read or no room to write now).
inline bool would_block(int err) {
  return err == EAGAIN || err == EWOULDBLOCK || err == EINTR;
}

/// A socket address (IPv4 or IPv6) with port.
struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t len = 0;

  [[nodiscard]] int family() const { return storage.ss_family; }
  [[nodiscard]] std::uint16_t port() const;
  void set_port(std::uint16_t port);
  /// "1.2.3.4:5678" or "[::1]:5678".
  [[nodiscard]] std::string to_string() const;
  [[nodiscard]] const sockaddr* raw() const { return reinterpret_cast<const sockaddr*>(&storage); }
  sockaddr* raw() { return reinterpret_cast<sockaddr*>(&storage); }
};

/// Whether two addresses are the same (family, address and port, byte for byte).
bool same_endpoint(const SocketAddress& a, const SocketAddress& b);

/// Parses "host:port", "[v6]:port", "host" (port 0) with name resolution (getaddrinfo).
/// A name with both IPv4 and IPv6 addresses resolves to its first IPv4 address.
Result<SocketAddress> resolve(std::string_view host_port);

/// The syntax of "host:port", "[v6]:port", "[v6]", "v6" or "host", without name resolution.
struct HostPort {
  std::string host;
  std::uint16_t port = 0;
  bool has_port = false;
};
Result<HostPort> parse_host_port(std::string_view host_port);
/// The local address the kernel would use to reach `remote` (connect a UDP socket, no traffic).
Result<SocketAddress> local_address_towards(const SocketAddress& remote);
/// The first address of interface `ifname` (IPv4 preferred).
Result<SocketAddress> interface_address(std::string_view ifname);

/// Owning file descriptor (closes on destruction).
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd();
  [[nodiscard]] int get() const { return fd_; }
  [[nodiscard]] bool valid() const { return fd_ >= 0; }
  int release();
  void reset();

 private:
  int fd_ = -1;
};

/// A listening TCP socket bound to `addr` (port 0: ephemeral), SO_REUSEADDR, close-on-exec.
Result<Fd> listen_on(const SocketAddress& addr, int backlog = 1024);
/// The address a bound socket actually has (with the ephemeral port filled in).
Result<SocketAddress> bound_address(int fd);
/// Connects to `addr`, retrying refused/unreachable connections with backoff until `deadline`.
/// Returns a blocking, TCP_NODELAY, close-on-exec socket.
Result<Fd> connect_with_retry(const SocketAddress& addr, Deadline deadline);
/// The same, from the local address `from` (null: the kernel's choice), so that the connection
/// leaves through that interface.
Result<Fd> connect_with_retry(const SocketAddress& addr, const SocketAddress* from,
                              Deadline deadline);
/// Accepts one connection, waiting at most until `deadline` (Timeout). Returns a blocking socket.
Result<Fd> accept_until(int listen_fd, Deadline deadline);

Status set_nonblocking(int fd, bool on);
Status set_nodelay(int fd);
/// SO_SNDBUF/SO_RCVBUF (0 leaves the kernel's autotuning alone).
Status set_buffer_sizes(int fd, std::size_t bytes);

/// Blocking send/recv of exactly `len` bytes (works on non-blocking sockets too, by polling),
/// bounded by `deadline`. A closed peer is PeerFailed; `what` names the operation in errors.
Status send_all(int fd, const void* data, std::size_t len, Deadline deadline,
                std::string_view what);
Status recv_all(int fd, void* data, std::size_t len, Deadline deadline, std::string_view what);

/// Host name of this machine.
std::string host_name();

}  // namespace loom::net
