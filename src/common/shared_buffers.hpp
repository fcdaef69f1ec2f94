// Host buffers that other processes on the host can map (loom::host_alloc): each is a memfd of
// its own, mapped shared here and recorded in a process-wide registry, so the shared-memory
// transport can tell a peer "this message lies at offset k of my descriptor d" and the peer maps
// that descriptor (through /proc/<pid>/fd/<d>) and copies with memcpy: one copy, in user space,
// instead of two through the slots or one through the kernel (process_vm_readv).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "common/status.hpp"

namespace loom::shared_buffers {

/// Where a range lies in a registered buffer.
struct Location {
  int fd = -1;               // the buffer's memfd in this process
  std::uint64_t gen = 0;     // unique per buffer in this process (an fd number is reused)
  std::uint64_t offset = 0;  // of the range's first byte in the buffer
  std::uint64_t size = 0;    // of the whole buffer
};

/// A new buffer of `bytes` (> 0), page aligned, zeroed.
Result<void*> allocate(std::size_t bytes);
enum class Released {
  Now,       // unmapped
  Deferred,  // an operation in flight holds it (hold()): unmapped when the last hold goes
  Unknown,   // not a buffer allocate() returned (or released already)
};
/// Frees a buffer allocate() returned.
Released release(void* p) noexcept;
/// Keeps the buffer that holds [p, p + len), if any, mapped while the handle lives (an operation
/// in flight that reads or writes it): release() then waits for the last hold. Null when no
/// buffer holds the range (one relaxed load when there are no buffers).
std::shared_ptr<void> hold(const void* p, std::size_t len);
/// The buffer that holds [p, p + len) entirely, if any.
std::optional<Location> find(const void* p, std::size_t len);

}  // namespace loom::shared_buffers
