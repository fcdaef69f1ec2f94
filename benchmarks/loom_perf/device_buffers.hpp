// loom-perf --device: the send/receive buffers in device memory (CUDA or the host simulation),
// one stream per rank; host mirrors hold the patterns that are written and verified.
#pragma once

#include <cstddef>
#include <string>

#include "device/device.hpp"
#include "loom/options.hpp"

namespace loom::perf {

class DeviceBuffers {
 public:
  /// `name`: "cuda" or "host-sim"; rank r uses device r % device_count() (one rank per GPU on a
  /// node). Throws loom::Error when that device is unavailable.
  DeviceBuffers(const std::string& name, std::size_t bytes, int rank);
  ~DeviceBuffers();
  DeviceBuffers(const DeviceBuffers&) = delete;
  DeviceBuffers& operator=(const DeviceBuffers&) = delete;

  [[nodiscard]] void* send() const { return send_; }
  [[nodiscard]] void* recv() const { return recv_; }
  [[nodiscard]] CollOptions options() const;
  /// Copies the host mirrors (`bytes_` each) to the device buffers, on the stream.
  void upload(const void* host_send, const void* host_recv);
  /// Copies the device receive and send buffers back into the host mirrors and waits.
  void download(void* host_send, void* host_recv);
  /// Waits until the stream is idle.
  void sync();

 private:
  device::Device* dev_ = nullptr;
  device::Stream stream_ = nullptr;
  std::size_t bytes_ = 0;
  void* send_ = nullptr;
  void* recv_ = nullptr;
};

}  // namespace loom::perf
