// The cuda_ipc wire format: one FIFO per direction of a pair, owned by the sender.
//
// The FIFO's data slots live where the receiver can read them with a device copy or kernel:
//   * peer-to-peer route: in the sender's device memory, exported with a CUDA IPC handle and
//     mapped by the receiver (so the receiver's copies and reduction kernels read straight from
//     the peer's GPU, over NVLink or PCIe);
//   * host-staging route (no peer access): in a pinned (cudaHostRegister'ed) POSIX shared-memory
//     segment that both processes map.
// The control block (slot descriptors and two counters) always lives in host shared memory:
// the sender publishes a piece once the device copy into its slot has completed; the receiver
// retires it once its own copy or reduction out of the slot has completed.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "transports/connection.hpp"

namespace loom::transport::cuda_ipc {

/// Slots per direction. A message is cut into pieces of at most one slot (LOOM_CUDA_IPC_SLOT_SIZE,
/// the same on every rank: a multiple of kSlotAlign, so a reduction never splits an element and
/// every slot starts aligned for the kernels' vector loads).
inline constexpr std::size_t kSlots = 4;
inline constexpr std::size_t kDefaultSlotBytes = std::size_t{1} << 20;
inline constexpr std::size_t kSlotAlign = 4096;
inline constexpr std::size_t kMaxSlotBytes = std::size_t{256} << 20;

/// Where piece `seq` of the stream of messages sits: slot seq % kSlots.
struct Descriptor {
  Tag tag;
  std::uint64_t message_bytes = 0;  // the whole message's length
  std::uint64_t offset = 0;         // of this piece within the message
  std::uint64_t bytes = 0;          // of this piece
};

struct ControlBlock {
  alignas(64) std::atomic<std::uint64_t> published{0};  // sender: pieces whose data is ready
  alignas(64) std::atomic<std::uint64_t> consumed{0};   // receiver: pieces it has read
  alignas(64) std::atomic<std::uint32_t> sender_closed{0};
  std::atomic<std::uint32_t> receiver_closed{0};
  // The rank whose failure the closing side had seen (-1: none): the peer's error then names
  // that rank, the cause, rather than the rank that merely closed after it.
  std::atomic<std::int32_t> sender_saw_failure_of{-1};
  std::atomic<std::int32_t> receiver_saw_failure_of{-1};
  Descriptor slots[kSlots];
};

/// The control block, rounded to a page so that staged data after it is page aligned (as
/// cudaHostRegister wants).
inline constexpr std::size_t kControlBytes = 4096;
static_assert(sizeof(ControlBlock) <= kControlBytes);
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);

/// Pieces a message of `bytes` is cut into (a zero-length message still takes one, so that it
/// is matched and its tag checked).
constexpr std::uint64_t pieces_of(std::size_t bytes, std::size_t slot_bytes) {
  return bytes == 0 ? 1 : (bytes + slot_bytes - 1) / slot_bytes;
}

}  // namespace loom::transport::cuda_ipc
