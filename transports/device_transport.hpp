// A transport that carries device buffers (cuda_ipc): what the direct path (src/device/
// direct_path.hpp) asks of it beyond a Transport, without naming it: the device runtime and the
// one stream every device operation of the communicator is ordered on.
#pragma once

#include "device_api/device.hpp"
#include "transports/transport.hpp"

namespace loom::transport {

class DeviceTransport : public Transport {
 public:
  [[nodiscard]] virtual device::Device& device() const = 0;
  /// The one stream every device operation of this communicator is ordered on.
  [[nodiscard]] virtual device::Stream stream() const = 0;
  [[nodiscard]] virtual int device_ordinal() const = 0;
  [[nodiscard]] virtual int rank() const = 0;
};

}  // namespace loom::transport
