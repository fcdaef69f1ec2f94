// The shared-memory transport's arena (transports/arena.hpp): one segment that rank 0 creates
// and every rank of the communicator maps, each rank's two call slots in it, and the doorbells
// that wake a rank sleeping until a slot is published.
//
//   [0, 4096)                    ArenaHeader (identity and geometry, written by rank 0)
//   [4096, slots_offset)         one cache line per rank: its "sleeping" flag
//   [slots_offset, end)          per rank, per parity: a SlotHeader line, then capacity bytes
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "transports/arena.hpp"
#include "transports/shm/doorbell.hpp"
#include "transports/shm/shm_layout.hpp"
#include "transports/shm/shm_segment.hpp"

namespace loom::transport::shm {

inline constexpr std::uint64_t kArenaMagic = 0x31524e414d4f4f4cULL;  // "LOOMANR1"
inline constexpr std::uint32_t kArenaVersion = 1;
inline constexpr std::size_t kMaxArenaCapacity = std::size_t{1} << 20;
inline constexpr int kMaxArenaRanks = 4096;

struct ArenaHeader {
  std::uint64_t magic = kArenaMagic;
  std::uint32_t version = kArenaVersion;
  std::int32_t nranks = 0;
  std::uint64_t comm_id = 0;
  std::uint64_t capacity = 0;
  std::uint64_t total_bytes = 0;
};

/// One published call: `seq` is the owner's call count once the slot holds that call.
struct alignas(kCacheLine) ArenaSlotHeader {
  std::atomic<std::uint64_t> seq{0};
  coll::Tag tag;
  std::uint64_t len = 0;
};
static_assert(sizeof(ArenaSlotHeader) == kCacheLine);

/// Offsets of an arena for `nranks` ranks and `capacity` payload bytes per slot.
struct ArenaGeometry {
  int nranks = 0;
  std::size_t capacity = 0;  // a multiple of 64

  [[nodiscard]] constexpr std::size_t stride() const { return kCacheLine + capacity; }
  [[nodiscard]] constexpr std::size_t flags_offset() const { return kPage; }
  [[nodiscard]] constexpr std::size_t slots_offset() const {
    return kPage + round_up(static_cast<std::size_t>(nranks) * kCacheLine, kPage);
  }
  [[nodiscard]] constexpr std::size_t slot_offset(int rank, unsigned parity) const {
    return slots_offset() + (static_cast<std::size_t>(rank) * 2 + parity) * stride();
  }
  [[nodiscard]] constexpr std::size_t total_bytes() const { return slot_offset(nranks, 0); }
  [[nodiscard]] constexpr bool valid() const {
    return nranks >= 1 && nranks <= kMaxArenaRanks && capacity >= kCacheLine &&
           capacity <= kMaxArenaCapacity && capacity % kCacheLine == 0;
  }
};

/// Writes the header of a new arena (the segment is zero-filled).
void init_arena(const Mapping& m, const ArenaGeometry& g, std::uint64_t comm_id);
/// Checks a mapped arena's header against what this rank expects (Mismatch naming rank 0).
Status check_arena(const Mapping& m, const ArenaGeometry& g, std::uint64_t comm_id, int reader);

class ShmArena final : public Arena {
 public:
  /// `bells`: every rank's doorbell (this rank's entry unused).
  ShmArena(int rank, ArenaGeometry g, Mapping mapping, std::shared_ptr<Doorbell> bell,
           std::vector<DoorbellAddress> bells);

  [[nodiscard]] std::size_t capacity() const override { return g_.capacity; }
  [[nodiscard]] std::uint8_t* own_slot() override { return payload(rank_, parity()); }
  void publish(const coll::Tag& tag, std::size_t len) override;
  [[nodiscard]] const std::uint8_t* peer_slot(int rank, coll::Tag& tag,
                                              std::size_t& len) const override;
  [[nodiscard]] const std::uint8_t* previous_slot(int rank, coll::Tag& tag,
                                                  std::size_t& len) const override;
  void finish(bool read_every_slot) override;
  [[nodiscard]] bool previous_read_every_slot() const override { return previous_read_all_; }
  bool prepare_wait(int rank, bool previous, std::vector<pollfd>& fds) override;

 private:
  [[nodiscard]] unsigned parity() const { return static_cast<unsigned>(calls_ & 1); }
  /// Rank `rank`'s slot of this rank's call `call` (counted from 0) if it holds that call.
  [[nodiscard]] const std::uint8_t* slot_of(int rank, std::uint64_t call, coll::Tag& tag,
                                            std::size_t& len) const;
  [[nodiscard]] ArenaSlotHeader& slot(int rank, unsigned parity) const {
    return *reinterpret_cast<ArenaSlotHeader*>(map_.data() + g_.slot_offset(rank, parity));
  }
  [[nodiscard]] std::uint8_t* payload(int rank, unsigned parity) const {
    return map_.data() + g_.slot_offset(rank, parity) + kCacheLine;
  }
  [[nodiscard]] std::atomic<std::uint32_t>& sleeping(int rank) const {
    return *reinterpret_cast<std::atomic<std::uint32_t>*>(
        map_.data() + g_.flags_offset() + static_cast<std::size_t>(rank) * kCacheLine);
  }

  int rank_;
  ArenaGeometry g_;
  Mapping map_;
  std::shared_ptr<Doorbell> bell_;
  std::vector<DoorbellAddress> bells_;
  std::uint64_t calls_ = 0;  // calls finished; the current one publishes calls_ + 1
  bool previous_read_all_ = false;  // the last finished call read every rank's slot
};

}  // namespace loom::transport::shm
