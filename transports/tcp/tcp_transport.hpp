// Sets up TcpConnections: each rank listens on one socket; for every pair, the lower rank
// connects (K sockets) and the higher rank accepts. Connections are made on first use, and the
// ring neighbours at init.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "common/crypto.hpp"
#include "common/socket.hpp"
#include "transports/tcp/tcp_connection.hpp"

namespace loom::transport::tcp {

struct TcpOptions {
  int sockets_per_peer = 2;
  std::size_t socket_buffer = 4u << 20;
  crypto::Secret secret{};  // every connection proves knowledge of it
};

class TcpTransport {
 public:
  /// Listens on `bind` (port 0: ephemeral).
  static Result<std::unique_ptr<TcpTransport>> listen(int rank, int nranks, std::uint64_t comm_id,
                                                      const net::SocketAddress& bind,
                                                      TcpOptions options);
  [[nodiscard]] const net::SocketAddress& address() const { return address_; }
  /// Every rank's listening address, in rank order (from the bootstrap allgather).
  void set_peer_addresses(std::vector<net::SocketAddress> addrs) { peers_ = std::move(addrs); }

  /// Connections to `peers`, establishing missing ones: first connects to higher ranks, then
  /// accepts from lower ones, so no two ranks wait on each other.
  Status ensure(const std::vector<int>& peers, Deadline deadline);
  /// The connection to `peer` (null if not established).
  [[nodiscard]] Connection* get(int peer) const;

 private:
  TcpTransport(int rank, int nranks, std::uint64_t comm_id, net::Fd listener,
               net::SocketAddress address, TcpOptions options);
  Status connect_to(int peer, Deadline deadline);
  Status accept_from(int peer, Deadline deadline);
  Status accept_one(Deadline deadline);
  Status add_connection(int peer, std::vector<net::Fd> sockets);

  int rank_;
  int nranks_;
  std::uint64_t comm_id_;
  net::Fd listener_;
  net::SocketAddress address_;
  TcpOptions options_;
  std::vector<net::SocketAddress> peers_;
  std::vector<std::unique_ptr<TcpConnection>> conns_;
  std::map<int, std::vector<net::Fd>> pending_;  // accepted sockets by peer, awaiting the rest
};

}  // namespace loom::transport::tcp
