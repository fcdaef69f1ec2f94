// The transport registry: each transport (shm, tcp, ofi) registers a factory under its
// TransportKind, and the communicator creates the transports its peers use through it, from one
// neutral CreateContext, without naming a concrete transport. The built-in transports are
// registered explicitly by register_builtin_transports() (registry.cpp includes each factory's
// header), so a static link keeps them: nothing depends on static initialisers.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "bootstrap/store.hpp"
#include "common/crypto.hpp"
#include "common/socket.hpp"
#include "common/status.hpp"
#include "config/config.hpp"
#include "transports/transport.hpp"

namespace loom::transport {

/// The transports host buffers travel over (cuda_ipc carries device buffers only, through
/// src/device/direct_path, and is not one of them).
enum class TransportKind : std::uint8_t { Shm = 0, Tcp = 1, Ofi = 2 };
inline constexpr std::size_t kNumTransportKinds = 3;
/// Its name, as LOOM_TRANSPORTS and Transport::name() spell it.
std::string_view to_string(TransportKind k);
/// The kind named `name` ("shm", "tcp", "ofi"), if any.
std::optional<TransportKind> kind_named(std::string_view name);

/// What a transport may use when it is created: the same for every transport.
struct CreateContext {
  int rank = 0;
  int nranks = 1;
  std::uint64_t comm_id = 0;
  std::shared_ptr<bootstrap::Store> store;
  const config::Config* config = nullptr;  // the communicator's settings (each reads its own)
  net::SocketAddress data_address;         // this rank's data address (tcp binds here)
  crypto::Secret secret{};                 // the job secret: data connections prove knowing it
  int ranks_on_host = 1;                   // ranks on this rank's host
  double cpu_load = 1;                     // ranks on this rank's busiest CPU
  double host_cpu_load = 1;                // ranks on the busiest CPU of this rank's host
  std::vector<net::SocketAddress> peer_addresses;  // every rank's data address (empty: unknown)
  /// PeerFailed naming the peer when it is known to have failed (asked while connecting).
  std::function<Status(int peer)> peer_check;
};

using Factory = Result<std::unique_ptr<Transport>> (*)(const CreateContext&);

class Registry {
 public:
  /// Registers `make` for `kind`; a kind registers once.
  Status add(TransportKind kind, Factory make);
  [[nodiscard]] bool has(TransportKind kind) const;
  /// A new transport of `kind`; an error naming the kind when none is registered.
  Result<std::unique_ptr<Transport>> create(TransportKind kind, const CreateContext& ctx) const;

 private:
  std::array<Factory, kNumTransportKinds> factories_{};
};

/// Registers shm, tcp and ofi in `r`.
Status register_builtin_transports(Registry& r);
/// The registry of the built-in transports (registered on first use, once).
const Registry& builtin_transports();

}  // namespace loom::transport
