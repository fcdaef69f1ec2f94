#include "transports/shm/shm_arena.hpp"

#include <new>

namespace loom::transport::shm {

void init_arena(const Mapping& m, const ArenaGeometry& g, std::uint64_t comm_id) {
  auto* h = new (m.data()) ArenaHeader;
  h->nranks = g.nranks;
  h->comm_id = comm_id;
  h->capacity = g.capacity;
  h->total_bytes = g.total_bytes();
  for (int r = 0; r < g.nranks; ++r) {
    new (m.data() + g.flags_offset() + static_cast<std::size_t>(r) * kCacheLine)
        std::atomic<std::uint32_t>(0);
    for (unsigned p = 0; p < 2; ++p) new (m.data() + g.slot_offset(r, p)) ArenaSlotHeader;
  }
}

Status check_arena(const Mapping& m, const ArenaGeometry& g, std::uint64_t comm_id, int reader) {
  const auto* h = reinterpret_cast<const ArenaHeader*>(m.data());
  if (m.size() < g.total_bytes() || h->magic != kArenaMagic || h->version != kArenaVersion ||
      h->nranks != g.nranks || h->comm_id != comm_id || h->capacity != g.capacity ||
      h->total_bytes != g.total_bytes())
    return make_error(ErrorCode::Mismatch,
                      "rank {}: rank 0's shared-memory arena is not the one expected ({} ranks, "
                      "{} bytes per slot, communicator {:016x}; it has {} ranks, {} bytes per "
                      "slot, communicator {:016x}, version {}); set LOOM_SHM_ONESHOT_MAX alike "
                      "on every rank",
                      reader, g.nranks, g.capacity, comm_id, h->nranks, h->capacity, h->comm_id,
                      h->version);
  return Status::ok();
}

ShmArena::ShmArena(int rank, ArenaGeometry g, Mapping mapping, std::shared_ptr<Doorbell> bell,
                   std::vector<DoorbellAddress> bells)
    : rank_(rank),
      g_(g),
      map_(std::move(mapping)),
      bell_(std::move(bell)),
      bells_(std::move(bells)) {}

void ShmArena::publish(const coll::Tag& tag, std::size_t len) {
  ArenaSlotHeader& s = slot(rank_, parity());
  s.tag = tag;
  s.len = len;
  // seq_cst, and the flags read after it: a rank that set its flag before this store sees the
  // slot when it looks again, one that set it after is rung (Dekker's pattern).
  s.seq.store(calls_ + 1, std::memory_order_seq_cst);
  for (int r = 0; r < g_.nranks; ++r) {
    if (r == rank_) continue;
    std::atomic<std::uint32_t>& f = sleeping(r);
    if (f.load(std::memory_order_seq_cst) != 0 && f.exchange(0) != 0)
      bell_->ring(bells_[static_cast<std::size_t>(r)]);
  }
}

const std::uint8_t* ShmArena::slot_of(int rank, std::uint64_t call, coll::Tag& tag,
                                      std::size_t& len) const {
  const auto p = static_cast<unsigned>(call & 1);
  const ArenaSlotHeader& s = slot(rank, p);
  if (s.seq.load(std::memory_order_acquire) != call + 1) return nullptr;
  tag = s.tag;
  len = s.len;
  return payload(rank, p);
}

const std::uint8_t* ShmArena::peer_slot(int rank, coll::Tag& tag, std::size_t& len) const {
  return slot_of(rank, calls_, tag, len);
}

const std::uint8_t* ShmArena::previous_slot(int rank, coll::Tag& tag, std::size_t& len) const {
  return calls_ == 0 ? nullptr : slot_of(rank, calls_ - 1, tag, len);
}

void ShmArena::finish(bool read_every_slot) {
  ++calls_;
  previous_read_all_ = read_every_slot;
  std::atomic<std::uint32_t>& f = sleeping(rank_);
  if (f.load(std::memory_order_relaxed) != 0) f.store(0, std::memory_order_relaxed);
}

bool ShmArena::prepare_wait(int rank, bool previous, std::vector<pollfd>& fds) {
  bell_->end_wait();
  bell_->begin_wait();  // drains rings that woke an earlier wait
  sleeping(rank_).store(1, std::memory_order_seq_cst);
  const std::uint64_t call = previous ? calls_ - 1 : calls_;
  if (slot(rank, static_cast<unsigned>(call & 1)).seq.load(std::memory_order_seq_cst) == call + 1)
    return false;
  fds.push_back(pollfd{bell_->fd(), POLLIN, 0});
  return true;
}

}  // namespace loom::transport::shm
