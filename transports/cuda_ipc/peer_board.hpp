// The peer-read route's board (transport::PeerBoard) over POSIX shared memory, and the agreement
// that sets it up. Each rank of the host creates one segment, maps every peer's, and registers
// all of them with the device (cudaHostRegister, mapped), so that its stream can write a flag
// into a peer's segment and wait on one in its own:
//
//   inbox[p]   (one 64-byte line each) the flag rank p's stream writes: p's progress through
//              the route's calls, 4 * ticket + phase; this rank's stream waits on it
//   abandon    written by this rank's host: its launches from that ticket on do nothing
//   left       this rank has left (its route is gone), with the rank whose failure it had seen
//   read_by[p] the last of this rank's cards rank p has read
//   ring       the last kRing cards this rank posted (slot ticket % kRing); a slot is reused
//              once every peer has read the card it holds
//
// The route is agreed at communicator creation: every rank votes (its LOOM_CUDA_IPC_PEER_READ
// and whether it can: every peer on this host reached p2p, at most kMaxBoardRanks ranks, stream
// memory operations work); it is on only when every rank can and none says off. "on" where it
// cannot be fails creation on every rank, naming the rank and the reason.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/store.hpp"
#include "device_api/ipc_peers.hpp"
#include "device_api/peer_card.hpp"
#include "transports/device_transport.hpp"
#include "transports/shm/shm_segment.hpp"

namespace loom::transport::cuda_ipc {

inline constexpr int kMaxBoardRanks = device::kMaxMultiBuffers;
inline constexpr std::size_t kRing = 64;

enum class PeerReadMode : std::uint8_t { Auto, On, Off };
/// LOOM_CUDA_IPC_PEER_READ's value (auto|on|off); InvalidUsage for anything else.
Result<PeerReadMode> parse_peer_read_mode(std::string_view s);

/// A flag word: written by a stream (or the host), read through std::atomic_ref on the host.
struct alignas(64) BoardWord {
  std::uint32_t value = 0;
};
struct alignas(64) BoardCounter {
  std::atomic<std::uint64_t> value{0};
};
struct BoardSlot {
  std::atomic<std::uint64_t> ticket{0};  // written after the card (release)
  device::PeerCard card;
};
struct BoardLayout {
  BoardWord inbox[kMaxBoardRanks];
  BoardWord abandon;
  BoardWord closed;  // 1 + the rank whose failure made this rank leave (0: -1), after closing
  BoardWord left;    // 1: this rank has left the board
  BoardCounter read_by[kMaxBoardRanks];
  BoardSlot ring[kRing];
};
static_assert(std::atomic_ref<std::uint32_t>::is_always_lock_free);

struct BoardSetup {
  device::Device* dev = nullptr;
  bootstrap::Store* store = nullptr;
  std::string prefix;  // the communicator's store prefix
  std::uint64_t comm_id = 0;
  int rank = 0;
  int nranks = 1;
  PeerReadMode mode = PeerReadMode::Auto;
  const device::IpcPeers* peers = nullptr;  // the cuda_ipc routes (null: ranks span hosts)
  Deadline deadline = Deadline::never();
};

class ShmPeerBoard final : public PeerBoard {
 public:
  /// Collective: the vote, then (when the route is on) the boards. Null when it is off.
  static Result<std::unique_ptr<ShmPeerBoard>> agree(const BoardSetup& setup);
  ~ShmPeerBoard() override;
  ShmPeerBoard(const ShmPeerBoard&) = delete;
  ShmPeerBoard& operator=(const ShmPeerBoard&) = delete;

  bool post(const device::PeerCard& card) override;
  bool read(int peer, std::uint64_t ticket, device::PeerCard& out) override;
  [[nodiscard]] std::uint32_t* inbox(int from) const override;
  [[nodiscard]] std::uint32_t* outbox(int to) const override;
  [[nodiscard]] std::uint32_t* abandon_word() const override;
  [[nodiscard]] std::uint64_t read_by(int peer) const override;
  void close(int cause) override;
  [[nodiscard]] bool closed(int peer, int& cause) const override;

 private:
  ShmPeerBoard(device::Device& dev, int rank, int nranks)
      : dev_(dev), rank_(rank), nranks_(nranks), layouts_(static_cast<std::size_t>(nranks)) {}
  Status build(const BoardSetup& setup);

  device::Device& dev_;
  int rank_;
  int nranks_;
  shm::CreatedSegment own_;
  std::vector<shm::Mapping> peers_;    // the peers' segments, mapped here
  std::vector<BoardLayout*> layouts_;  // by rank
  std::vector<void*> registered_;      // host addresses registered with the device
};

}  // namespace loom::transport::cuda_ipc
