#include "transports/shm/channel.hpp"

#include <unistd.h>

#include <memory>

#include "transports/shm/peer_process.hpp"

namespace loom::transport::shm {

Channel::Channel(Mapping mapping, const ChannelGeometry& g)
    : mapping_(std::move(mapping)),
      geo_(g),
      header_(reinterpret_cast<ChannelHeader*>(mapping_.data())),
      descs_(reinterpret_cast<SlotDesc*>(mapping_.data() + g.desc_offset())),
      payload_(mapping_.data() + g.payload_offset()) {}

void init_channel(const Mapping& mapping, const ChannelGeometry& g, std::uint64_t comm_id, int from,
                  int to) {
  auto* h = std::construct_at(reinterpret_cast<ChannelHeader*>(mapping.data()));
  h->comm_id = comm_id;
  h->from_rank = from;
  h->to_rank = to;
  h->slot_bytes = g.slot_bytes;
  h->nslots = g.nslots;
  h->total_bytes = g.total_bytes();
  h->sender_pid = static_cast<std::int32_t>(::getpid());
  h->sender_pid_ns = own_pid_namespace();
  h->sender_address = reinterpret_cast<std::uintptr_t>(mapping.data());
  auto* descs = reinterpret_cast<SlotDesc*>(mapping.data() + g.desc_offset());
  for (std::size_t i = 0; i < g.nslots; ++i) std::construct_at(descs + i);
}

Result<ChannelGeometry> check_channel(const Mapping& mapping, std::uint64_t comm_id, int from,
                                      int to) {
  const auto& h = *reinterpret_cast<const ChannelHeader*>(mapping.data());
  if (h.magic != kChannelMagic || h.version != kChannelVersion ||
      h.header_bytes != sizeof(ChannelHeader))
    return make_error(ErrorCode::Mismatch,
                      "rank {}: the shared-memory channel from rank {} has magic {:#x}, version "
                      "{}, header size {}; expected {:#x}, {}, {} (different loom versions?)",
                      to, from, h.magic, h.version, h.header_bytes, kChannelMagic, kChannelVersion,
                      sizeof(ChannelHeader));
  if (h.comm_id != comm_id || h.from_rank != from || h.to_rank != to)
    return make_error(ErrorCode::Mismatch,
                      "rank {}: the shared-memory channel published for rank {} belongs to "
                      "communicator {:#x}, rank {} -> rank {}; expected communicator {:#x}",
                      to, from, h.comm_id, h.from_rank, h.to_rank, comm_id);
  ChannelGeometry g{h.slot_bytes, h.nslots};
  if (!valid_geometry(g) || g.total_bytes() != h.total_bytes || g.total_bytes() != mapping.size())
    return make_error(ErrorCode::Mismatch,
                      "rank {}: the shared-memory channel from rank {} declares {} slots of {} "
                      "bytes ({} bytes), but its segment has {} bytes",
                      to, from, h.nslots, h.slot_bytes, h.total_bytes, mapping.size());
  return g;
}

}  // namespace loom::transport::shm
