// The ofi transport over several NICs: one OfiTransport (endpoint, completion queue, liveness
// connections) per libfabric domain named in LOOM_OFI_DOMAINS (EFA devices, or interfaces for
// socket providers), and one StripedConnection per peer over their connections, rail i of a rank
// talking to rail i of its peer. Ranks may have different numbers of rails (LOOM_OFI_DOMAINS=near
// picks each rank's nearest NICs): a pair then uses the rails both have, 0 to min(L, P) - 1.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "transports/ofi/ofi_transport.hpp"
#include "transports/striped/striped_connection.hpp"
#include "transports/transport.hpp"

namespace loom::transport::ofi {

class OfiRails final : public Transport {
 public:
  /// How many rails a peer has (it publishes the count when it creates its transport).
  using PeerRails = std::function<Result<std::size_t>(int peer, Deadline deadline)>;

  /// Over `rails` (rail i created with OfiOptions::rail = i); messages of at least twice
  /// `stripe_min` bytes are split across them. Without `peer_rails`, every peer has as many.
  OfiRails(std::vector<std::unique_ptr<OfiTransport>> rails, int nranks, std::size_t stripe_min,
           PeerRails peer_rails = {});
  ~OfiRails() override;
  OfiRails(const OfiRails&) = delete;
  OfiRails& operator=(const OfiRails&) = delete;

  [[nodiscard]] std::string_view name() const override { return "ofi"; }
  [[nodiscard]] std::size_t rails() const { return rails_.size(); }
  [[nodiscard]] OfiTransport& rail(std::size_t i) const { return *rails_.at(i); }
  Status ensure(const std::vector<int>& peers, Deadline deadline) override;
  [[nodiscard]] Connection* get(int peer) const override;
  [[nodiscard]] std::optional<DeviceMemorySupport> device_memory_support() const override;
  Status enable_device_memory(std::string_view runtime, const void* probe, std::size_t bytes,
                              int ordinal) override;

 private:
  std::vector<std::unique_ptr<StripedConnection>> conns_;  // by peer; destroyed after the rails'
  std::vector<std::unique_ptr<OfiTransport>> rails_;
  std::size_t stripe_min_;
  PeerRails peer_rails_;
  std::vector<std::size_t> shared_;  // by peer: rails in common with it (0: not asked yet)
};

}  // namespace loom::transport::ofi
