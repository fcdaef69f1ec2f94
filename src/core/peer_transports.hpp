// Routes each peer to the transport chosen for it (shm inside a host, ofi or tcp across hosts,
// or as LOOM_TRANSPORTS says) and establishes connections on first use, through the
// transport::Transport interface (a table by TransportKind, no switch per transport). The
// transports are created through the transport registry (transports/registry.hpp): this file
// names no concrete transport.
#pragma once

#include <array>
#include <memory>
#include <vector>

#include "core/transport_choice.hpp"
#include "transports/registry.hpp"
#include "transports/transport.hpp"

namespace loom::detail {

class PeerTransports final : public transport::ConnectionSet {
 public:
  using ByKind = std::array<std::unique_ptr<transport::Transport>, kNumTransportKinds>;

  /// The transports for `ctx.rank`'s peers: `made` (transports created before the layout was
  /// known, such as the tcp listener whose address the layout publishes; they are kept), and
  /// every other kind some peer uses (`choice`, by peer), created through `registry` from `ctx`.
  static Result<std::unique_ptr<PeerTransports>> create(
      const transport::CreateContext& ctx, std::vector<TransportKind> choice,
      std::vector<std::unique_ptr<transport::Transport>> made,
      const transport::Registry& registry = transport::builtin_transports());
  PeerTransports(int rank, std::vector<TransportKind> choice, ByKind transports);
  ~PeerTransports() override;

  /// Connections to every peer in `peers`, each over its transport.
  Status ensure(const std::vector<int>& peers, Deadline deadline) override;
  [[nodiscard]] transport::Connection* get(int peer) const override;
  [[nodiscard]] TransportKind kind(int peer) const {
    return choice_[static_cast<std::size_t>(peer)];
  }
  /// What the created transports ask of the plans (any one's ask holds).
  [[nodiscard]] transport::PlanHints plan_hints() const;
  /// The transport of kind `k` (null when no peer uses it), e.g. ofi for the device-network
  /// vote.
  [[nodiscard]] transport::Transport* transport(TransportKind k) const {
    return by_kind_[static_cast<std::size_t>(k)].get();
  }

 private:
  int rank_;
  std::vector<TransportKind> choice_;
  ByKind by_kind_;  // null: unused
};

}  // namespace loom::detail
