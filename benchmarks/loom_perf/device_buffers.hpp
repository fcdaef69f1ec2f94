// loom-perf --device: the send/receive buffers in device memory (CUDA or the host simulation),
// one stream per rank; host mirrors hold the patterns that are written and verified.
#pragma once

#include <cstddef>
#include <string>

#include "device/device.hpp"
#include "loom/options.hpp"

namespace loom::perf {

/// Makes device local_rank % device_count() of runtime `name` ("cuda" or "host-sim") current
/// (one rank per GPU on a node). Call it before creating the communicator, which runs its
/// device work (cuda_ipc FIFOs, kernels) on the device current at creation, as NCCL does.
void select_device(const std::string& name, int local_rank);

class DeviceBuffers {
 public:
  /// Buffers on the current device (see select_device), and a stream of their own, or the
  /// device's default (legacy) stream with `default_stream` (as torch's default stream). Throws
  /// loom::Error when `name` is not an available runtime.
  DeviceBuffers(const std::string& name, std::size_t bytes, int rank, bool default_stream = false);
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
  device::Stream stream_ = nullptr;  // null: the device's default stream
  bool own_stream_ = false;
  std::size_t bytes_ = 0;
  void* send_ = nullptr;
  void* recv_ = nullptr;
};

}  // namespace loom::perf
