// Memory layout of one shared-memory channel: a single-producer / single-consumer ring of slots
// carrying messages from one rank (the sender, who creates the segment) to another.
//
//   [0, 4096)                  ChannelHeader (identity, ring indices, wake-up and close flags)
//   [4096, payload_offset)     nslots SlotDesc, two cache lines each
//   [payload_offset, end)      nslots payload slots of slot_bytes each (page aligned)
//
// The producer writes a slot's payload and descriptor, then publishes it with head.store(release);
// the consumer reads head with acquire, copies the slot out, and frees it with tail.store(release).
// head and tail count slots ever published / consumed (64-bit, never wrap in practice).
// Descriptors go round the ring in order. Payloads too, or (SlotOrder::Reuse) they restart at
// slot 0 whenever the sender finds every slot consumed (`base`), so a channel that carries one
// message at a time keeps using the same, cache-hot slot instead of walking nslots x the message
// size through the caches.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "transports/connection.hpp"

namespace loom::transport::shm {

inline constexpr std::uint64_t kChannelMagic = 0x314d48534d4f4f4cULL;  // "LOOMSHM1"
inline constexpr std::uint32_t kChannelVersion = 4;
inline constexpr std::size_t kCacheLine = 64;
inline constexpr std::size_t kPage = 4096;

// These live in memory shared between processes: they must be address-free (lock-free) and have
// the size of the plain integer on every side.
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<std::uint64_t>) == 8);
static_assert(sizeof(std::atomic<std::uint32_t>) == 4);

struct ChannelHeader {
  // Written by the creator (the sender) before the segment's name is published; read-only after.
  alignas(kCacheLine) std::uint64_t magic = kChannelMagic;
  std::uint32_t version = kChannelVersion;
  std::uint32_t header_bytes = sizeof(ChannelHeader);
  std::uint64_t comm_id = 0;
  std::int32_t from_rank = -1;
  std::int32_t to_rank = -1;
  std::uint64_t slot_bytes = 0;
  std::uint64_t nslots = 0;
  std::uint64_t total_bytes = 0;  // size of the whole segment
  std::int32_t sender_pid = 0;
  std::uint32_t reserved = 0;
  std::uint64_t sender_pid_ns = 0;  // inode of the sender's /proc/self/ns/pid (0: unknown)
  // Where this header is mapped in the sender's address space: the receiver probes single-copy
  // reads (process_vm_readv) by reading the header through it and comparing with its own view.
  std::uint64_t sender_address = 0;

  // Set by the receiver once it has mapped the segment; before that, single_copy says whether
  // the sender may publish single-copy descriptors (the receiver's probe read succeeded).
  alignas(kCacheLine) std::atomic<std::uint32_t> mapped{0};
  std::atomic<std::uint32_t> single_copy{0};
  // Set with single_copy: the receiver maps the sender's loom::host_alloc buffers (its probe
  // read succeeded, whether or not process_vm_readv pays here).
  std::atomic<std::uint32_t> maps_shared{0};

  // Producer index (written only by the sender).
  alignas(kCacheLine) std::atomic<std::uint64_t> head{0};
  // The ring position whose payload is slot 0: position k's payload is slot (k - base) % nslots.
  // Written only by the sender, only while no published slot is unconsumed (tail == head), and
  // before the head that publishes the next slot: a receiver that acquired head reads it right.
  std::atomic<std::uint64_t> base{0};
  // Consumer index (written only by the receiver).
  alignas(kCacheLine) std::atomic<std::uint64_t> tail{0};

  // The receiver is about to block waiting for head to move (set by the receiver, cleared by
  // whoever rings its doorbell).
  alignas(kCacheLine) std::atomic<std::uint32_t> receiver_sleeping{0};
  // The sender is about to block waiting for tail to move.
  alignas(kCacheLine) std::atomic<std::uint32_t> sender_sleeping{0};

  // Set when either side's connection is destroyed (communicator destroyed or aborted).
  alignas(kCacheLine) std::atomic<std::uint32_t> sender_closed{0};
  std::atomic<std::uint32_t> receiver_closed{0};
};
static_assert(std::is_standard_layout_v<ChannelHeader>);
static_assert(sizeof(ChannelHeader) <= kPage);

/// Describes the fragment held by one slot. A single-copy descriptor (remote != 0) carries no
/// payload: the receiver reads `length` bytes at `remote` in the sender's address space, and
/// consuming the slot (tail moving past it) tells the sender its buffer is free again. From a
/// loom::host_alloc buffer (shared_fd >= 0) the receiver maps that buffer's memfd instead
/// (/proc/<sender>/fd/<shared_fd>) and copies from `shared_offset` with memcpy.
struct alignas(kCacheLine) SlotDesc {
  Tag tag;
  std::uint64_t total = 0;   // length of the whole message
  std::uint64_t offset = 0;  // of this fragment within the message
  std::uint64_t length = 0;  // of this fragment
  std::uint64_t remote = 0;  // single copy: the fragment's address in the sender (0: in the slot)
  std::int64_t shared_fd = -1;      // single copy from a shared buffer: its memfd in the sender
  std::uint64_t shared_gen = 0;     // the buffer's generation (fd numbers are reused)
  std::uint64_t shared_offset = 0;  // the fragment's offset in the buffer
};
static_assert(sizeof(SlotDesc) == 2 * kCacheLine);
static_assert(std::is_trivially_copyable_v<SlotDesc>);

constexpr std::size_t round_up(std::size_t n, std::size_t to) {
  return (n + to - 1) / to * to;
}

/// Which slot a sender writes a payload to when every published slot has been consumed.
enum class SlotOrder : std::uint8_t {
  Auto,    // chosen by the communicator (Reuse where a CPU runs 3+ ranks, else Rotate)
  Reuse,   // the first slot again: one message at a time stays in one cache-hot slot
  Rotate,  // the next slot: the one just read is left alone while the peer may still cache it
};

/// The payload slot of ring position `index`, given the position `base` whose payload is slot 0.
constexpr std::uint64_t payload_slot(std::uint64_t index, std::uint64_t base,
                                     std::uint64_t nslots) {
  return (index - base) % nslots;
}

/// The sender's base for the next position `head`, the consumer's tail being `tail`: `head`
/// itself once every published slot is consumed (the next payload goes to slot 0, last used and
/// still in the caches), else unchanged (the slots in use stay where they are).
constexpr std::uint64_t next_payload_base(std::uint64_t head, std::uint64_t tail,
                                          std::uint64_t base) {
  return tail == head ? head : base;
}

/// Sizes and offsets of a channel with `nslots` slots of `slot_bytes` (a multiple of 64, so every
/// fragment but a message's last holds whole elements of any DataType).
struct ChannelGeometry {
  std::size_t slot_bytes = 0;
  std::size_t nslots = 0;

  [[nodiscard]] constexpr std::size_t desc_offset() const { return kPage; }
  [[nodiscard]] constexpr std::size_t payload_offset() const {
    return kPage + round_up(nslots * sizeof(SlotDesc), kPage);
  }
  [[nodiscard]] constexpr std::size_t total_bytes() const {
    return payload_offset() + nslots * slot_bytes;
  }
};

inline constexpr std::size_t kMinSlotBytes = 64;
inline constexpr std::size_t kMaxSlotBytes = std::size_t{1} << 30;
inline constexpr std::size_t kMaxSlots = 4096;
inline constexpr std::size_t kMaxChannelBytes = std::size_t{16} << 30;

/// True if a geometry is within the limits above (so total_bytes() cannot overflow).
constexpr bool valid_geometry(const ChannelGeometry& g) {
  return g.slot_bytes >= kMinSlotBytes && g.slot_bytes <= kMaxSlotBytes &&
         g.slot_bytes % kCacheLine == 0 && g.nslots >= 1 && g.nslots <= kMaxSlots &&
         g.total_bytes() <= kMaxChannelBytes;
}

}  // namespace loom::transport::shm
