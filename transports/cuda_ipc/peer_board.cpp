#include "transports/cuda_ipc/peer_board.hpp"

#include <fmt/format.h>

#include <cstring>
#include <new>

#include "log/log.hpp"

namespace loom::transport::cuda_ipc {
namespace {

constexpr std::uint8_t kAble = 1;

std::string_view mode_name(PeerReadMode m) {
  switch (m) {
    case PeerReadMode::Auto: return "auto";
    case PeerReadMode::On: return "on";
    case PeerReadMode::Off: return "off";
  }
  return "?";
}

// Whether this rank's stream can write a flag and wait for it (stream memory operations).
Status check_stream_memory_ops(device::Device& dev, Deadline deadline) {
  LOOM_ASSIGN_OR_RETURN(void* p, dev.alloc_pinned(sizeof(std::uint32_t)));
  auto* word = static_cast<std::uint32_t*>(p);
  std::atomic_ref<std::uint32_t>(*word).store(0);
  Status st = Status::ok();
  auto s = dev.create_stream();
  if (!s.is_ok()) st = s.status();
  if (st.is_ok()) {
    st = dev.write_value(*s, word, 1);
    if (st.is_ok()) st = dev.wait_value(*s, word, 1);
    if (st.is_ok()) st = dev.synchronize(*s, deadline);
    dev.destroy_stream(*s);
  }
  dev.free_pinned(p);
  return st;
}

// Why this rank cannot take the route ("" when it can).
std::string unable_because(const BoardSetup& s) {
  if (s.peers == nullptr) return "the ranks span hosts";
  if (s.nranks > kMaxBoardRanks)
    return fmt::format("{} ranks (at most {} read each other's buffers)", s.nranks, kMaxBoardRanks);
  for (int p = 0; p < s.nranks; ++p) {
    const device::PeerBuffer& b = s.peers->peer(p);
    if (p == s.rank || b.route == device::PeerRoute::PeerToPeer) continue;
    return fmt::format("rank {} is reached through {} ({})", p, device::to_string(b.route),
                       b.why.empty() ? "no peer access" : b.why);
  }
  Status st = check_stream_memory_ops(*s.dev, s.deadline);
  if (!st.is_ok()) return fmt::format("no stream memory operations: {}", st.message());
  return "";
}

bootstrap::Bytes encode_vote(PeerReadMode mode, const std::string& why) {
  bootstrap::Bytes b{static_cast<std::uint8_t>(mode), why.empty() ? kAble : std::uint8_t{0}};
  b.insert(b.end(), why.begin(), why.end());
  return b;
}

}  // namespace

Result<PeerReadMode> parse_peer_read_mode(std::string_view s) {
  if (s == "auto") return PeerReadMode::Auto;
  if (s == "on") return PeerReadMode::On;
  if (s == "off") return PeerReadMode::Off;
  return make_error(ErrorCode::InvalidUsage,
                    "LOOM_CUDA_IPC_PEER_READ='{}' is not one of: auto, on, off", s);
}

Result<std::unique_ptr<ShmPeerBoard>> ShmPeerBoard::agree(const BoardSetup& setup) {
  std::unique_ptr<ShmPeerBoard> none;
  if (setup.nranks < 2) return none;  // nothing to read
  const std::string why = setup.mode == PeerReadMode::Off ? "" : unable_because(setup);
  LOOM_ASSIGN_OR_RETURN(
      auto votes,
      bootstrap::store_allgather(*setup.store, setup.prefix + "cuda_ipc/peer_read/", setup.rank,
                                 setup.nranks, encode_vote(setup.mode, why), setup.deadline));
  int forced_by = -1;
  std::string against;  // the first reason the route is off
  for (int r = 0; r < setup.nranks; ++r) {
    const bootstrap::Bytes& v = votes[static_cast<std::size_t>(r)];
    if (v.size() < 2)
      return make_error(ErrorCode::Internal, "rank {}: rank {}'s peer-read vote is malformed",
                        setup.rank, r);
    const auto mode = static_cast<PeerReadMode>(v[0]);
    if (mode == PeerReadMode::On && forced_by < 0) forced_by = r;
    if (!against.empty()) continue;
    if (mode == PeerReadMode::Off)
      against = fmt::format("rank {} sets LOOM_CUDA_IPC_PEER_READ=off", r);
    else if ((v[1] & kAble) == 0)
      against = fmt::format("rank {} cannot read its peers' buffers in place: {}", r,
                            std::string(v.begin() + 2, v.end()));
  }
  if (!against.empty()) {
    if (forced_by >= 0)
      return make_error(ErrorCode::InvalidUsage,
                        "rank {}: LOOM_CUDA_IPC_PEER_READ=on on rank {}, but {}", setup.rank,
                        forced_by, against);
    LOOM_LOG_INFO(Cuda, "rank {}: device collectives move through cuda_ipc FIFOs: {}", setup.rank,
                  against);
    return none;
  }
  std::unique_ptr<ShmPeerBoard> board(new ShmPeerBoard(*setup.dev, setup.rank, setup.nranks));
  LOOM_RETURN_IF_ERROR(board->build(setup).with_context(
      fmt::format("rank {}: setting up the peer-read route's board", setup.rank)));
  LOOM_LOG_INFO(Cuda,
                "rank {}: allreduce, allgather, reduce_scatter, broadcast and reduce on device "
                "buffers read the {} ranks' buffers in place (peer-read route, "
                "LOOM_CUDA_IPC_PEER_READ={})",
                setup.rank, setup.nranks, mode_name(setup.mode));
  return board;
}

Status ShmPeerBoard::build(const BoardSetup& s) {
  LOOM_ASSIGN_OR_RETURN(std::string nonce, shm::random_hex(8));
  LOOM_ASSIGN_OR_RETURN(
      own_, shm::create_segment(fmt::format("/loom-cipb-{:016x}-{}-{}", s.comm_id, s.rank, nonce),
                                sizeof(BoardLayout)));
  layouts_[static_cast<std::size_t>(rank_)] = new (own_.mapping.data()) BoardLayout();
  const std::string names = s.prefix + "cuda_ipc/peer_read/board/";
  const std::string mine = own_.name.str();
  LOOM_ASSIGN_OR_RETURN(
      auto all, bootstrap::store_allgather(*s.store, names, s.rank, s.nranks,
                                           bootstrap::Bytes(mine.begin(), mine.end()), s.deadline));
  peers_.resize(static_cast<std::size_t>(nranks_));
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_) continue;
    const bootstrap::Bytes& b = all[static_cast<std::size_t>(p)];
    const std::string name(b.begin(), b.end());
    if (name.rfind(fmt::format("/loom-cipb-{:016x}-{}-", s.comm_id, p), 0) != 0)
      return make_error(ErrorCode::Mismatch, "rank {} published a malformed board name", p);
    LOOM_ASSIGN_OR_RETURN(peers_[static_cast<std::size_t>(p)],
                          shm::open_segment(name, sizeof(BoardLayout), sizeof(BoardLayout) + 4096));
    layouts_[static_cast<std::size_t>(p)] =
        reinterpret_cast<BoardLayout*>(peers_[static_cast<std::size_t>(p)].data());
  }
  for (BoardLayout* l : layouts_) {  // streams write into the peers' boards, wait on ours
    LOOM_RETURN_IF_ERROR(dev_.host_register(l, sizeof(BoardLayout)).status());
    registered_.push_back(l);
  }
  // Every rank has mapped every board: the names can go (the memory lives while mapped).
  LOOM_RETURN_IF_ERROR(bootstrap::store_barrier(*s.store, s.prefix + "cuda_ipc/peer_read/mapped",
                                                s.rank, s.nranks, s.deadline));
  own_.name.unlink();
  return Status::ok();
}

ShmPeerBoard::~ShmPeerBoard() {
  for (void* p : registered_) dev_.host_unregister(p);
}

bool ShmPeerBoard::post(const device::PeerCard& card) {
  BoardLayout& me = *layouts_[static_cast<std::size_t>(rank_)];
  if (card.ticket > kRing)
    for (int p = 0; p < nranks_; ++p)
      if (p != rank_ && me.read_by[p].value.load(std::memory_order_acquire) < card.ticket - kRing)
        return false;  // the slot's card is still unread by p
  BoardSlot& slot = me.ring[card.ticket % kRing];
  std::memcpy(&slot.card, &card, sizeof card);
  slot.ticket.store(card.ticket, std::memory_order_release);
  return true;
}

bool ShmPeerBoard::read(int peer, std::uint64_t ticket, device::PeerCard& out) {
  BoardLayout& theirs = *layouts_[static_cast<std::size_t>(peer)];
  BoardSlot& slot = theirs.ring[ticket % kRing];
  if (slot.ticket.load(std::memory_order_acquire) != ticket) return false;
  std::memcpy(&out, &slot.card, sizeof out);
  theirs.read_by[rank_].value.store(ticket, std::memory_order_release);  // the slot may be reused
  return true;
}

std::uint32_t* ShmPeerBoard::inbox(int from) const {
  return &layouts_[static_cast<std::size_t>(rank_)]->inbox[from].value;
}

std::uint32_t* ShmPeerBoard::outbox(int to) const {
  return &layouts_[static_cast<std::size_t>(to)]->inbox[rank_].value;
}

std::uint32_t* ShmPeerBoard::abandon_word() const {
  return &layouts_[static_cast<std::size_t>(rank_)]->abandon.value;
}

std::uint64_t ShmPeerBoard::read_by(int peer) const {
  return layouts_[static_cast<std::size_t>(rank_)]->read_by[peer].value.load(
      std::memory_order_acquire);
}

}  // namespace loom::transport::cuda_ipc

namespace loom::transport::cuda_ipc {

void ShmPeerBoard::close(int cause) {
  BoardLayout& me = *layouts_[static_cast<std::size_t>(rank_)];
  std::atomic_ref<std::uint32_t>(me.closed.value)
      .store(static_cast<std::uint32_t>(cause + 1), std::memory_order_relaxed);
  std::atomic_ref<std::uint32_t>(me.left.value).store(1, std::memory_order_release);
}

bool ShmPeerBoard::closed(int peer, int& cause) const {
  BoardLayout& theirs = *layouts_[static_cast<std::size_t>(peer)];
  if (std::atomic_ref<std::uint32_t>(theirs.left.value).load(std::memory_order_acquire) == 0)
    return false;
  cause = static_cast<int>(std::atomic_ref<std::uint32_t>(theirs.closed.value).load()) - 1;
  return true;
}

}  // namespace loom::transport::cuda_ipc
