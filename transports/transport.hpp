// The interface every transport implements (shm, tcp, ofi, cuda_ipc): the connections to the
// peers it was chosen for, established on demand, and its name. The communicator routes each
// peer to one Transport through this interface only (src/core/peer_transports.hpp).
#pragma once

#include <string_view>

#include "transports/connection.hpp"

namespace loom::transport {

class Transport : public ConnectionSet {
 public:
  /// The transport's name, as LOOM_TRANSPORTS and Connection::name() spell it ("shm", "tcp",
  /// "ofi", "cuda_ipc").
  [[nodiscard]] virtual std::string_view name() const = 0;
};

}  // namespace loom::transport
