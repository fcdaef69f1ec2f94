// The interface every transport implements (shm, tcp, ofi, cuda_ipc): the connections to the
// peers it was chosen for, established on demand, its name, and the few questions the layers
// above ask of a transport without naming it (its published address, what it asks of the plans,
// whether it sends device memory). The communicator routes each peer to one Transport through
// this interface only (src/core/peer_transports.hpp); transports are made through the registry
// (transports/registry.hpp).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/socket.hpp"
#include "transports/arena.hpp"
#include "transports/connection.hpp"

namespace loom::transport {

/// What a transport asks of the plans that run over it (the communicator folds every created
/// transport's into its plan settings).
struct PlanHints {
  /// Ring sends go through buffered slots, never single copy (shm, where ranks share a CPU).
  bool buffered_ring_sends = false;
};

/// A transport that can send device memory straight from the device: what it runs over.
struct DeviceMemorySupport {
  std::string provider;    // e.g. the libfabric provider ("efa")
  bool registers = false;  // the provider registers device memory (FI_HMEM)
};

class Transport : public ConnectionSet {
 public:
  /// The transport's name, as LOOM_TRANSPORTS and Connection::name() spell it ("shm", "tcp",
  /// "ofi", "cuda_ipc").
  [[nodiscard]] virtual std::string_view name() const = 0;
  /// Where peers reach this rank, published in its card before the layout is known (tcp: its
  /// listener); nothing for transports that publish their own addresses.
  [[nodiscard]] virtual std::optional<net::SocketAddress> card_address() const {
    return std::nullopt;
  }
  /// Further addresses of this rank for its card, one per extra network rail (tcp: a listener on
  /// each LOOM_SOCKET_IFNAME interface after the first); peers learn them as
  /// CreateContext::peer_rails.
  [[nodiscard]] virtual std::vector<net::SocketAddress> card_rails() const { return {}; }
  [[nodiscard]] virtual PlanHints plan_hints() const { return {}; }
  /// Whether it could carry device buffers across hosts (empty: never).
  [[nodiscard]] virtual std::optional<DeviceMemorySupport> device_memory_support() const {
    return std::nullopt;
  }
  /// Lets connections carry device buffers of the runtime named `runtime` ("cuda", or another
  /// runtime's, simulated on host memory), after checking that `probe` (`bytes` of device memory
  /// on device `ordinal`) registers. Call before the first device-buffer request.
  virtual Status enable_device_memory(std::string_view runtime, const void* probe,
                                      std::size_t bytes, int ordinal);
  /// This rank saw `rank` fail (thread-safe, non-blocking): transports whose peers learn of a
  /// failure from this rank closing its ends tell them the cause (cuda_ipc).
  virtual void note_failure(int rank) { (void)rank; }
  /// An arena (transports/arena.hpp) over every rank of the communicator, with `capacity`
  /// payload bytes per slot. Collective: every rank calls it, with the same capacity, once each
  /// knows that this transport serves all of its peers. Null: this transport makes none.
  virtual Result<std::unique_ptr<Arena>> make_arena(std::size_t capacity, Deadline deadline) {
    (void)capacity;
    (void)deadline;
    return std::unique_ptr<Arena>();
  }
};

inline Status Transport::enable_device_memory(std::string_view runtime, const void* probe,
                                              std::size_t bytes, int ordinal) {
  (void)probe;
  (void)bytes;
  (void)ordinal;
  return make_error(ErrorCode::InvalidUsage, "the {} transport cannot send {} device memory",
                    name(), runtime);
}

}  // namespace loom::transport
