// Sets up TcpConnections: each rank listens on one socket per rail (one unless LOOM_SOCKET_IFNAME
// names several interfaces: tcp_rails.hpp); for every pair, the lower rank connects (K sockets,
// spread over the rails) and the higher rank accepts, adopting the connector's socket count and
// striping threshold from its hello. Connections are made on first use, and the ring neighbours
// at init. Accepting runs every pending handshake at once (HelloAcceptor), so connections that
// are not a peer's never hold up one that is.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <vector>

#include "common/crypto.hpp"
#include "common/socket.hpp"
#include "transports/tcp/tcp_accept.hpp"
#include "transports/tcp/tcp_connection.hpp"
#include "transports/tcp/tcp_progress.hpp"
#include "transports/transport.hpp"

namespace loom::transport::tcp {

struct TcpOptions {
  int sockets_per_peer = 0;               // 0: chosen from the CPUs per rank (auto_sockets)
  std::size_t stripe_min = 128u << 10;    // stripe messages of 2x this or more (0: never)
  std::size_t socket_buffer = 4u << 20;   // SO_SNDBUF/SO_RCVBUF (see apply_socket_buffer)
  int progress_threads = -1;              // -1: chosen from the CPUs per rank (choose_threads)
  crypto::Secret secret{};                // every connection proves knowledge of it
  std::vector<net::SocketAddress> rails;  // further listeners, one per extra rail (extra_rails)
  std::chrono::milliseconds hello_timeout{5000};  // an accepted connection's time to say hello
};

/// Sockets per peer for `sockets_per_peer` 0 (auto): one per CPU this rank has to itself
/// (`cpus` / `ranks_on_host`), at least 2 (two streams keep the pipe full while one waits on
/// its peer) and at most 8. A positive setting is taken as is.
int choose_sockets(int sockets_per_peer, int cpus, int ranks_on_host);
/// Sets both socket buffers to `bytes` where the kernel allows it (SO_*BUFFORCE with
/// CAP_NET_ADMIN, else SO_*BUF up to net.core.[rw]mem_max); where it would clamp the request,
/// leaves the buffers to the kernel's autotuning (which grows past the clamp, up to
/// net.ipv4.tcp_[rw]mem) instead of pinning them small. 0: autotuning.
void apply_socket_buffer(int fd, std::size_t bytes);

class TcpTransport final : public Transport {
 public:
  /// Listens on `bind` (port 0: ephemeral) and on each of options.rails.
  static Result<std::unique_ptr<TcpTransport>> listen(int rank, int nranks, std::uint64_t comm_id,
                                                      const net::SocketAddress& bind,
                                                      TcpOptions options);
  [[nodiscard]] const net::SocketAddress& address() const { return address_; }
  [[nodiscard]] std::optional<net::SocketAddress> card_address() const override { return address_; }
  [[nodiscard]] std::vector<net::SocketAddress> card_rails() const override { return rails_; }
  /// Every rank's listening address, in rank order (from the bootstrap allgather).
  void set_peer_addresses(std::vector<net::SocketAddress> addrs) { peers_ = std::move(addrs); }
  /// Every rank's further rails, in rank order (empty: no rank has any).
  void set_peer_rails(std::vector<std::vector<net::SocketAddress>> rails) {
    peer_rails_ = std::move(rails);
  }
  /// How many ranks share this host (for the automatic socket count; default 1).
  void set_ranks_on_host(int n) { ranks_on_host_ = n; }
  /// The socket count this rank asks for when it connects.
  [[nodiscard]] int sockets_per_peer() const;
  /// How many progress threads serve this rank's connections (0: the executor does it all).
  [[nodiscard]] int progress_threads() const;

  /// Connections to `peers`, establishing missing ones: first connects to higher ranks, then
  /// accepts from lower ones, so no two ranks wait on each other.
  Status ensure(const std::vector<int>& peers, Deadline deadline) override;
  /// The connection to `peer` (null if not established).
  [[nodiscard]] Connection* get(int peer) const override;
  [[nodiscard]] std::string_view name() const override { return "tcp"; }

 private:
  TcpTransport(int rank, int nranks, std::uint64_t comm_id, std::vector<net::Fd> listeners,
               std::vector<net::SocketAddress> addresses, TcpOptions options);
  /// `peer`'s further rails (empty when it has none or they are unknown).
  [[nodiscard]] const std::vector<net::SocketAddress>& rails_of(int peer) const;
  /// Connects socket `index` of `count` to `peer` along its rail pair and says hello.
  Result<net::Fd> connect_socket(int peer, int index, int count, Deadline deadline);
  Status connect_to(int peer, Deadline deadline);
  Status hello(int fd, const Hello& h, int peer, const net::SocketAddress& addr,
               Deadline deadline) const;
  Status accept_from(int peer, Deadline deadline);
  bool admit(const Hello& h) const;
  void file(AcceptedSocket s);
  Status add_connection(int peer, std::vector<net::Fd> sockets, std::size_t stripe_min);
  struct Pending {  // accepted sockets of one peer, awaiting the rest
    std::vector<net::Fd> fds;
    int nsockets = 0;
    std::size_t stripe_min = 0;
  };

  int rank_;
  int nranks_;
  std::uint64_t comm_id_;
  std::vector<net::Fd> listeners_;         // the primary one, then one per extra rail
  std::vector<int> listen_fds_;            // their descriptors, for the acceptor
  net::SocketAddress address_;             // the primary listener's
  std::vector<net::SocketAddress> rails_;  // the other listeners'
  TcpOptions options_;
  int ranks_on_host_ = 1;
  std::vector<net::SocketAddress> peers_;
  std::vector<std::vector<net::SocketAddress>> peer_rails_;
  std::vector<std::unique_ptr<TcpConnection>> conns_;
  std::map<int, Pending> pending_;         // by peer
  HelloAcceptor acceptor_;                 // connections not yet authenticated
  std::unique_ptr<TcpProgress> progress_;  // destroyed first: its threads use the connections
};

}  // namespace loom::transport::tcp
