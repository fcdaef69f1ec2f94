// Host buffers that ranks on the same host read directly (as NCCL's ncclMemAlloc): a message
// sent from such a buffer over shared memory is copied once, by the receiver, with memcpy,
// instead of twice through the channel's slots (or once through the kernel, process_vm_readv).
// Any buffer works with every call; these only make large shared-memory sends cheaper (from
// LOOM_SHM_SINGLE_COPY_MIN bytes, when LOOM_SHM_SINGLE_COPY is not off). Receive buffers gain
// nothing from it. The memory is shared with the host's other processes of the same user only
// in that they may read it while this process sends from it.
#pragma once

#include <cstddef>
#include <span>
#include <utility>

namespace loom {

/// `bytes` (> 0) of zeroed, page-aligned host memory. Throws loom::Error (InvalidArgument,
/// SystemError) when it cannot be had.
void* host_alloc(std::size_t bytes);
/// Frees what host_alloc returned (null: nothing). Throws InvalidArgument for another pointer.
/// No operation may still use the buffer.
void host_free(void* p);

/// host_alloc for `count` elements of T, freed with the object.
template <typename T>
class HostBuffer {
 public:
  explicit HostBuffer(std::size_t count)
      : data_(static_cast<T*>(host_alloc(count > 0 ? count * sizeof(T) : 1))), count_(count) {}
  ~HostBuffer() {
    if (data_ != nullptr) host_free(data_);
  }
  HostBuffer(HostBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), count_(std::exchange(o.count_, 0)) {}
  HostBuffer& operator=(HostBuffer&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(count_, o.count_);
    return *this;
  }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  [[nodiscard]] T* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return count_; }
  [[nodiscard]] std::span<T> span() const noexcept { return {data_, count_}; }

 private:
  T* data_;
  std::size_t count_;
};

}  // namespace loom
