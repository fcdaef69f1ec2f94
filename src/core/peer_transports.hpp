// Routes each peer to the transport chosen for it (shm inside a host, ofi or tcp across hosts,
// or as LOOM_TRANSPORTS says) and establishes connections on first use, through the
// transport::Transport interface (a table by TransportKind, no switch per transport).
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "core/transport_choice.hpp"
#include "transports/ofi/ofi_transport.hpp"
#include "transports/shm/shm_transport.hpp"
#include "transports/tcp/tcp_transport.hpp"
#include "transports/transport.hpp"

namespace loom::detail {

class PeerTransports final : public transport::ConnectionSet {
 public:
  PeerTransports(int rank, std::vector<TransportKind> choice,
                 std::unique_ptr<transport::tcp::TcpTransport> tcp,
                 std::unique_ptr<transport::shm::ShmTransport> shm,
                 std::unique_ptr<transport::ofi::OfiTransport> ofi = nullptr);
  ~PeerTransports() override;

  /// Connections to every peer in `peers`, each over its transport.
  Status ensure(const std::vector<int>& peers, Deadline deadline) override;
  [[nodiscard]] transport::Connection* get(int peer) const override;
  [[nodiscard]] TransportKind kind(int peer) const {
    return choice_[static_cast<std::size_t>(peer)];
  }
  /// The ofi transport (null when no peer uses it).
  [[nodiscard]] transport::ofi::OfiTransport* ofi() const { return ofi_; }

 private:
  [[nodiscard]] transport::Transport* of(TransportKind k) const {
    return by_kind_[static_cast<std::size_t>(k)].get();
  }

  int rank_;
  std::vector<TransportKind> choice_;
  std::array<std::unique_ptr<transport::Transport>, kNumTransportKinds> by_kind_;  // null: unused
  transport::ofi::OfiTransport* ofi_ = nullptr;  // by_kind_[Ofi], for the device-network vote
};

/// The libfabric request for this rank: LOOM_OFI_PROVIDER, and the local address of
/// `data_address` for socket-based providers.
transport::ofi::FabricRequest ofi_request(const config::Config& cfg,
                                          const net::SocketAddress& data_address);
/// Probes libfabric for the provider `request` resolves to.
OfiAvailability probe_ofi(const transport::ofi::FabricRequest& request);
/// This rank's allow list for the layout exchange (see resolve_transport_list), as text.
Result<std::string> effective_transports(int rank, const config::Config& cfg,
                                         const net::SocketAddress& data_address);
/// Creates the ofi transport when some peer uses it (null otherwise).
Result<std::unique_ptr<transport::ofi::OfiTransport>> make_ofi_transport(
    int rank, int nranks, std::uint64_t comm_id, const std::shared_ptr<bootstrap::Store>& store,
    const config::Config& cfg, const net::SocketAddress& data_address,
    const std::vector<TransportKind>& choice, const crypto::Secret& secret, int ranks_on_host);

}  // namespace loom::detail
