// ShmTransport::make_arena: the arena's segment and doorbells (see shm_arena.hpp). Every rank
// publishes a card (pid, doorbell, mailbox, nonce) under loom/<comm>/shm/arena/<rank>; rank 0
// creates the segment and says in .../segment how it travels: "memfd" (the descriptor goes to
// every rank's mailbox, nothing is named in /dev/shm) or a /dev/shm name (named after its
// creator, unlinked once every rank has mapped it).
#include <unistd.h>

#include <array>
#include <cstring>

#include "common/process.hpp"
#include "log/log.hpp"
#include "transports/shm/shm_transport.hpp"

namespace loom::transport::shm {
namespace {

std::string arena_key(std::uint64_t comm_id, const std::string& what) {
  return fmt::format("loom/{:016x}/shm/arena/{}", comm_id, what);
}

std::array<char, 32> nonce_of(const Card& c) {
  std::array<char, 32> n{};
  std::memcpy(n.data(), c.nonce.data(), std::min(n.size(), c.nonce.size()));
  return n;
}

}  // namespace

Result<std::unique_ptr<Arena>> ShmTransport::make_arena(std::size_t capacity, Deadline deadline) {
  const ArenaGeometry g{nranks_, round_up(capacity, kCacheLine)};
  if (!g.valid())
    return make_error(ErrorCode::InvalidUsage,
                      "rank {}: a shared-memory arena of {} bytes per slot for {} ranks is outside "
                      "the limits (64 bytes to {} per slot, at most {} ranks)",
                      rank_, capacity, nranks_, kMaxArenaCapacity, kMaxArenaRanks);
  Card mine;
  mine.pid = ::getpid();
  mine.pid_ns = proc::own_pid_namespace();
  mine.doorbell = bell_->name();
  mine.mailbox = mailbox_ ? mailbox_->name() : "";
  LOOM_ASSIGN_OR_RETURN(mine.nonce, random_hex(16));
  LOOM_RETURN_IF_ERROR(store_->set(arena_key(comm_id_, std::to_string(rank_)),
                                   bootstrap::as_bytes(format_card(mine))));
  std::vector<Card> cards(static_cast<std::size_t>(nranks_));
  std::vector<DoorbellAddress> bells(static_cast<std::size_t>(nranks_));
  for (int r = 0; r < nranks_; ++r) {
    if (r == rank_) continue;
    auto got = wait_for_key(arena_key(comm_id_, std::to_string(r)), nullptr, deadline, r);
    if (!got.is_ok())
      return got.status().with_context(
          fmt::format("rank {}: waiting for rank {}'s shared-memory arena card", rank_, r));
    const auto at = static_cast<std::size_t>(r);
    LOOM_ASSIGN_OR_RETURN(cards[at], parse_card(std::string(got->begin(), got->end()), rank_, r));
    LOOM_ASSIGN_OR_RETURN(bells[at], DoorbellAddress::from_name(cards[at].doorbell));
    LOOM_RETURN_IF_ERROR(bell_->probe(bells[at], r));
  }
  Result<Mapping> m =
      rank_ == 0 ? create_arena(g, mine, cards, deadline) : open_arena(g, cards.front(), deadline);
  if (!m.is_ok()) return m.status();
  LOOM_LOG_DEBUG(Shm, "rank {}: shared-memory arena of {} ranks, {} bytes per slot", rank_, nranks_,
                 g.capacity);
  return std::unique_ptr<Arena>(new ShmArena(rank_, g, std::move(*m), bell_, std::move(bells)));
}

Result<Mapping> ShmTransport::create_arena(const ArenaGeometry& g, const Card& mine,
                                           const std::vector<Card>& cards, Deadline deadline) {
  bool by_fd = mailbox_ != nullptr;
  for (int r = 1; r < nranks_; ++r)
    by_fd = by_fd && !cards[static_cast<std::size_t>(r)].mailbox.empty();
  if (!by_fd) {
    LOOM_ASSIGN_OR_RETURN(CreatedSegment seg, create_segment(fmt::format("/loom-{:016x}-arena-{}",
                                                                         comm_id_, mine.nonce),
                                                             g.total_bytes()));
    init_arena(seg.mapping, g, comm_id_);
    LOOM_RETURN_IF_ERROR(
        store_->set(arena_key(comm_id_, "segment"), bootstrap::as_bytes(seg.name.str())));
    for (int r = 1; r < nranks_; ++r) {
      auto got =
          wait_for_key(arena_key(comm_id_, fmt::format("mapped/{}", r)), nullptr, deadline, r);
      if (!got.is_ok())
        return got.status().with_context(
            fmt::format("rank 0: waiting for rank {} to map the shared-memory arena", r));
    }
    seg.name.unlink();
    return std::move(seg.mapping);
  }
  LOOM_ASSIGN_OR_RETURN(CreatedSegment seg, create_anonymous_segment(g.total_bytes()));
  init_arena(seg.mapping, g, comm_id_);
  LOOM_RETURN_IF_ERROR(
      store_->set(arena_key(comm_id_, "segment"), bootstrap::as_bytes(std::string("memfd"))));
  Letter letter;
  letter.comm_id = comm_id_;
  letter.from_rank = 0;
  letter.nonce = nonce_of(mine);
  for (int r = 1; r < nranks_; ++r) {
    letter.to_rank = r;
    LOOM_ASSIGN_OR_RETURN(DoorbellAddress to,
                          DoorbellAddress::from_name(cards[static_cast<std::size_t>(r)].mailbox));
    LOOM_RETURN_IF_ERROR(FdMailbox::send(to, letter, seg.fd.get(), deadline)
                             .with_context("rank 0: handing the shared-memory arena over"));
  }
  return std::move(seg.mapping);
}

Result<Mapping> ShmTransport::open_arena(const ArenaGeometry& g, const Card& owner,
                                         Deadline deadline) {
  auto got = wait_for_key(arena_key(comm_id_, "segment"), nullptr, deadline, 0);
  if (!got.is_ok())
    return got.status().with_context(
        fmt::format("rank {}: waiting for rank 0's shared-memory arena", rank_));
  const std::string how(got->begin(), got->end());
  Mapping m;
  if (how == "memfd") {
    if (!mailbox_)
      return make_error(ErrorCode::Internal,
                        "rank {}: rank 0 hands its arena over as a memfd, "
                        "but this rank has no mailbox",
                        rank_);
    const proc::PeerProcess owner_process = proc::PeerProcess::watch(owner.pid, owner.pid_ns);
    auto fd = mailbox_->receive(0, owner.pid, nonce_of(owner), deadline, [&] {
      if (!owner_process.alive())
        return make_error(ErrorCode::PeerFailed, "rank 0 (pid {}) exited", owner.pid);
      return peer_check_ ? peer_check_(0) : Status::ok();
    });
    if (!fd.is_ok())
      return fd.status().with_context(
          fmt::format("rank {}: waiting for rank 0's shared-memory arena", rank_));
    LOOM_ASSIGN_OR_RETURN(
        m, map_segment_fd(fd->get(), g.total_bytes(), g.total_bytes(), "(the arena of rank 0)"));
  } else {
    const std::string prefix = fmt::format("/loom-{:016x}-arena-{}_o", comm_id_, owner.nonce);
    if (how.rfind(prefix, 0) != 0 || how.find('/', 1) != std::string::npos)
      return make_error(ErrorCode::Mismatch,
                        "rank {}: rank 0 published a malformed shared-memory arena name", rank_);
    LOOM_ASSIGN_OR_RETURN(m, open_segment(how, g.total_bytes(), g.total_bytes()));
    LOOM_RETURN_IF_ERROR(store_->set(arena_key(comm_id_, fmt::format("mapped/{}", rank_)),
                                     bootstrap::as_bytes(how)));
  }
  LOOM_RETURN_IF_ERROR(check_arena(m, g, comm_id_, rank_));
  return m;
}

}  // namespace loom::transport::shm
