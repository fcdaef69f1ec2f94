// Routes each peer to the transport chosen for it (shm inside a host, tcp across hosts, or as
// LOOM_TRANSPORTS says) and establishes connections on first use.
#pragma once

#include <memory>
#include <vector>

#include "core/transport_choice.hpp"
#include "transports/shm/shm_transport.hpp"
#include "transports/tcp/tcp_transport.hpp"

namespace loom::detail {

class PeerTransports {
 public:
  PeerTransports(int rank, std::vector<TransportKind> choice,
                 std::unique_ptr<transport::tcp::TcpTransport> tcp,
                 std::unique_ptr<transport::shm::ShmTransport> shm);

  /// Connections to every peer in `peers`, each over its transport.
  Status ensure(const std::vector<int>& peers, Deadline deadline);
  [[nodiscard]] transport::Connection* get(int peer) const;
  [[nodiscard]] TransportKind kind(int peer) const {
    return choice_[static_cast<std::size_t>(peer)];
  }

 private:
  int rank_;
  std::vector<TransportKind> choice_;
  std::unique_ptr<transport::tcp::TcpTransport> tcp_;
  std::unique_ptr<transport::shm::ShmTransport> shm_;
};

}  // namespace loom::detail
