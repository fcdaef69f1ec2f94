// ShmTransport::make_arena: the arena's segment and doorbells (see shm_arena.hpp). The ranks
// exchange cards (pid, doorbell, mailbox, nonce) in one allgather under
// loom/<comm>/shm/arena/card; rank 0 creates the segment. When every rank has a mailbox (each
// knows it from the cards) the segment's descriptor goes to every mailbox and nothing is named
// in /dev/shm; else rank 0 publishes its /dev/shm name in .../segment (named after its creator,
// unlinked once every rank has mapped it).
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
  // One server-side gather of every rank's card (2 store requests per rank, not n).
  const std::string text = format_card(mine);
  auto all = bootstrap::store_allgather(
      *store_, arena_key(comm_id_, "card"), rank_, nranks_, bootstrap::as_bytes(text), deadline,
      [this] { return peer_check_ ? peer_check_(-1) : Status::ok(); });
  if (!all.is_ok())
    return all.status().with_context(
        fmt::format("rank {}: gathering the shared-memory arena's cards", rank_));
  std::vector<Card> cards(static_cast<std::size_t>(nranks_));
  std::vector<DoorbellAddress> bells(static_cast<std::size_t>(nranks_));
  for (int r = 0; r < nranks_; ++r) {
    if (r == rank_) continue;
    const auto at = static_cast<std::size_t>(r);
    LOOM_ASSIGN_OR_RETURN(cards[at],
                          parse_card(std::string(bootstrap::as_text((*all)[at])), rank_, r));
    LOOM_ASSIGN_OR_RETURN(bells[at], DoorbellAddress::from_name(cards[at].doorbell));
    LOOM_RETURN_IF_ERROR(bell_->probe(bells[at], r));
  }
  // Every rank has every card, so each knows as rank 0 does how the segment travels: as a
  // descriptor when every rank has a mailbox (nothing more to ask the store), else named.
  bool by_fd = true;
  for (int r = 0; r < nranks_; ++r)
    by_fd = by_fd && (r == rank_ ? mailbox_ != nullptr
                                 : !cards[static_cast<std::size_t>(r)].mailbox.empty());
  Result<Mapping> m = rank_ == 0 ? create_arena(g, mine, cards, by_fd, deadline)
                                 : open_arena(g, cards.front(), by_fd, deadline);
  if (!m.is_ok()) return m.status();
  LOOM_LOG_DEBUG(Shm, "rank {}: shared-memory arena of {} ranks, {} bytes per slot", rank_, nranks_,
                 g.capacity);
  return std::unique_ptr<Arena>(new ShmArena(rank_, g, std::move(*m), bell_, std::move(bells)));
}

Result<Mapping> ShmTransport::create_arena(const ArenaGeometry& g, const Card& mine,
                                           const std::vector<Card>& cards, bool by_fd,
                                           Deadline deadline) {
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

Result<Mapping> ShmTransport::open_arena(const ArenaGeometry& g, const Card& owner, bool by_fd,
                                         Deadline deadline) {
  Mapping m;
  if (by_fd) {
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
    auto got = wait_for_key(arena_key(comm_id_, "segment"), nullptr, deadline, 0);
    if (!got.is_ok())
      return got.status().with_context(
          fmt::format("rank {}: waiting for rank 0's shared-memory arena", rank_));
    const std::string how(got->begin(), got->end());
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
