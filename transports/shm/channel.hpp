// One direction of a shared-memory connection: a mapped channel segment (see shm_layout.hpp)
// with typed access to its header, slot descriptors and slot payloads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.hpp"
#include "transports/shm/shm_layout.hpp"
#include "transports/shm/shm_segment.hpp"

namespace loom::transport::shm {

class Channel {
 public:
  Channel() = default;
  /// `mapping` holds a channel of geometry `g`, already initialised (init_channel) or checked
  /// (check_channel). The geometry is kept privately: later writes to the shared header by a
  /// misbehaving peer cannot move our accesses out of bounds.
  Channel(Mapping mapping, const ChannelGeometry& g);

  [[nodiscard]] ChannelHeader& header() const { return *header_; }
  /// Descriptor of ring position `index` (a head/tail count), and its payload, given the
  /// position whose payload is slot 0 (ChannelHeader::base).
  [[nodiscard]] SlotDesc& desc(std::uint64_t index) const { return descs_[index % geo_.nslots]; }
  [[nodiscard]] std::uint8_t* payload(std::uint64_t index, std::uint64_t base) const {
    return payload_ + payload_slot(index, base, geo_.nslots) * geo_.slot_bytes;
  }
  [[nodiscard]] std::uint64_t nslots() const { return geo_.nslots; }
  [[nodiscard]] std::size_t slot_bytes() const { return geo_.slot_bytes; }

 private:
  Mapping mapping_;
  ChannelGeometry geo_{};
  ChannelHeader* header_ = nullptr;
  SlotDesc* descs_ = nullptr;
  std::uint8_t* payload_ = nullptr;
};

/// Constructs the header of a freshly created segment of `g.total_bytes()` bytes carrying
/// messages from rank `from` to rank `to`.
void init_channel(const Mapping& mapping, const ChannelGeometry& g, std::uint64_t comm_id, int from,
                  int to);

/// Checks that `mapping` is a channel from `from` to `to` of communicator `comm_id`, of a
/// sane geometry that fits the mapping; returns that geometry.
Result<ChannelGeometry> check_channel(const Mapping& mapping, std::uint64_t comm_id, int from,
                                      int to);

/// Removes segments that killed processes left in `dir` (/dev/shm): a named segment (the
/// fallback where anonymous ones are impossible) is unlinked only once mapped by both sides, so a
/// process killed during connection setup can leave one. A "loom-*" file of ours (same uid) is
/// removed when the owner its name records (owner_tag()) provably no longer exists, whatever it
/// holds. A name without an owner (older loom) is removed when it carries a channel header naming
/// a sender process in our pid namespace that no longer exists, unless it belongs to
/// communicator `own_comm_id` (left to its connection setup). Returns the names removed.
std::vector<std::string> remove_orphaned_channels(std::uint64_t own_comm_id,
                                                  const std::string& dir = "/dev/shm");

}  // namespace loom::transport::shm
