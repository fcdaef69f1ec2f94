#include "benchmarks/loom_perf/device_buffers.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "loom/error.hpp"

namespace loom::perf {

namespace {
constexpr std::chrono::minutes kSyncTimeout{10};
}

void select_device(const std::string& name, int local_rank) {
  device::Device* dev = value_or_throw(device::device_by_name(name));
  if (!dev) throw_if_error(make_error(ErrorCode::InvalidUsage, "no device runtime '{}'", name));
  throw_if_error(dev->set_device(std::max(local_rank, 0) % std::max(dev->device_count(), 1)));
}

DeviceBuffers::DeviceBuffers(const std::string& name, std::size_t bytes, int rank,
                             bool default_stream)
    : bytes_(std::max<std::size_t>(bytes, 1)) {
  dev_ = value_or_throw(device::device_by_name(name));
  if (!dev_) throw_if_error(make_error(ErrorCode::InvalidUsage, "no device runtime '{}'", name));
  if (!default_stream) {
    stream_ = value_or_throw(dev_->create_stream());
    own_stream_ = true;
  }
  auto alloc = [&](const char* which) {
    auto p = dev_->alloc(bytes_);
    if (!p.is_ok())
      throw_if_error(p.status().with_context(fmt::format(
          "rank {}: allocating the device {} buffer of {} bytes (-e)", rank, which, bytes_)));
    return *p;
  };
  try {
    send_ = alloc("send");
    recv_ = alloc("receive");
  } catch (...) {  // the destructor does not run for a constructor that throws
    if (send_ != nullptr) dev_->free(send_);
    if (own_stream_) dev_->destroy_stream(stream_);
    throw;
  }
}

DeviceBuffers::~DeviceBuffers() {
  if (!dev_) return;
  (void)dev_->synchronize(stream_, Deadline::after(kSyncTimeout));
  dev_->free(send_);
  dev_->free(recv_);
  if (own_stream_) dev_->destroy_stream(stream_);
}

CollOptions DeviceBuffers::options() const {
  CollOptions o;
  o.stream = stream_;
  return o;
}

void DeviceBuffers::upload(const void* host_send, const void* host_recv) {
  throw_if_error(dev_->copy_async(send_, host_send, bytes_, stream_));
  throw_if_error(dev_->copy_async(recv_, host_recv, bytes_, stream_));
  sync();
}

void DeviceBuffers::download(void* host_send, void* host_recv) {
  throw_if_error(dev_->copy_async(host_send, send_, bytes_, stream_));
  throw_if_error(dev_->copy_async(host_recv, recv_, bytes_, stream_));
  sync();
}

void DeviceBuffers::sync() {
  throw_if_error(dev_->synchronize(stream_, Deadline::after(kSyncTimeout)));
}

}  // namespace loom::perf
