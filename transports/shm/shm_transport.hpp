// Sets up ShmConnections between ranks on one host. Each rank owns a doorbell and a descriptor
// mailbox (abstract Unix sockets: no files). Each rank publishes one card (pid, doorbell,
// mailbox, a nonce) through the bootstrap store, at its first connection; a peer reads it once.
// For every pair, each side then creates the channel segment it sends on and hands it over: as
// an anonymous segment (memfd) whose descriptor goes to the peer's mailbox (fd_mailbox.hpp), so
// nothing is ever named in /dev/shm; or, where that is impossible (no memfd_create,
// LOOM_SHM_SEGMENTS=named), as a /dev/shm segment named after its creator (shm_segment.hpp) and
// published in the store, unlinked once the receiver has mapped it and removed by any later
// process once its creator is provably gone. The receiver acknowledges a channel in the
// channel's own header, not through the store: connecting k peers costs 1 + k store requests
// (memfd). Connections are made on first use: both ranks call ensure() for each other at about
// the same time.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "bootstrap/store.hpp"
#include "common/deadline.hpp"
#include "transports/shm/fd_mailbox.hpp"
#include "transports/shm/shm_arena.hpp"
#include "transports/shm/shm_card.hpp"
#include "transports/shm/shm_connection.hpp"
#include "transports/shm/shm_policy.hpp"
#include "transports/shm/single_copy.hpp"
#include "transports/transport.hpp"

namespace loom::transport::shm {

/// How channel segments travel (LOOM_SHM_SEGMENTS).
enum class SegmentKind : std::uint8_t {
  Auto,   // anonymous (memfd) where this process can create them, else named
  Memfd,  // anonymous only (an error where impossible)
  Named,  // named /dev/shm segments
};

struct ShmOptions {
  std::size_t slot_bytes = 256 << 10;  // rounded up to a multiple of 64
  std::size_t nslots = 8;
  SingleCopy single_copy = SingleCopy::Auto;  // LOOM_SHM_SINGLE_COPY
  std::size_t single_copy_min = 64 << 10;     // messages this large (and larger) use it
  // LOOM_SHM_SINGLE_COPY_MAX: the largest message that uses it where process_vm_readv is slower
  // than memcpy (0 as parsed: auto)
  SingleCopyMax single_copy_max{256 << 10, 256 << 10};
  SlotOrder slot_order = SlotOrder::Auto;    // LOOM_SHM_SLOT_ORDER (Auto here: Rotate)
  SegmentKind segments = SegmentKind::Auto;  // LOOM_SHM_SEGMENTS
  bool test_kill_after_create = false;       // LOOM_TEST_SHM_KILL_AFTER_CREATE (tests only)
};

/// Parses LOOM_SHM_SLOT_ORDER: auto, reuse or rotate.
Result<SlotOrder> parse_slot_order(std::string_view text);
/// Parses LOOM_SHM_SEGMENTS: auto, memfd or named.
Result<SegmentKind> parse_segment_kind(std::string_view text);

/// Removes the named channel segments (the fallback to memfd) whose creators are provably gone:
/// done at every shm setup, and by a rank whose communicator's creation failed on a peer's
/// death, so that a rank killed during setup leaves nothing in /dev/shm.
void remove_orphans(int rank, std::uint64_t comm_id);

class ShmTransport final : public Transport {
 public:
  static Result<std::unique_ptr<ShmTransport>> create(int rank, int nranks, std::uint64_t comm_id,
                                                      std::shared_ptr<bootstrap::Store> store,
                                                      ShmOptions options);
  ~ShmTransport() override;
  ShmTransport(const ShmTransport&) = delete;
  ShmTransport& operator=(const ShmTransport&) = delete;

  /// Connections to `peers`, establishing missing ones in phases over all of them (publish every
  /// card; create and hand over every outgoing channel; map every incoming one; wait for every
  /// acknowledgement), each waiting only for what peers do in an earlier phase, so no two ranks
  /// wait on each other. On failure, whatever this call created is unlinked, and when a peer
  /// failed, segments of processes that are gone are removed from /dev/shm.
  Status ensure(const std::vector<int>& peers, Deadline deadline) override;
  /// The connection to `peer` (null if not established).
  [[nodiscard]] Connection* get(int peer) const override;
  [[nodiscard]] std::string_view name() const override { return "shm"; }
  /// The abstract socket name of this rank's doorbell.
  [[nodiscard]] const std::string& doorbell_name() const;
  /// Whether this rank hands its channels over as anonymous segments (else named ones).
  [[nodiscard]] bool anonymous() const { return mailbox_ != nullptr; }
  /// What ensure() asks, at least every 100 ms while it waits for a peer, whether that peer is
  /// known to have failed (a non-ok status ends the wait with it; peer -1: whether any peer is).
  /// None: wait until the deadline.
  void set_peer_check(std::function<Status(int peer)> check) { peer_check_ = std::move(check); }
  /// What the plans over shm should do (its factory decides: shm_factory.hpp).
  void set_plan_hints(PlanHints hints) { hints_ = hints; }
  [[nodiscard]] PlanHints plan_hints() const override { return hints_; }
  /// Rank 0 creates the arena's segment (anonymous when channels are, then handed to every
  /// rank's mailbox; else named, unlinked once every rank mapped it); every rank publishes its
  /// doorbell (shm_arena_setup.cpp).
  Result<std::unique_ptr<Arena>> make_arena(std::size_t capacity, Deadline deadline) override;

 private:
  struct Handshake;

  ShmTransport(int rank, int nranks, std::uint64_t comm_id, std::shared_ptr<bootstrap::Store> store,
               ChannelGeometry geometry, ShmOptions options, std::shared_ptr<Doorbell> doorbell,
               std::unique_ptr<FdMailbox> mailbox);
  Status connect_all(std::vector<Handshake>& hs, Deadline deadline);
  Status publish(Handshake& h);
  Status deliver(Handshake& h, Deadline deadline);
  Status create_channel(Handshake& h);
  Status receive_channel(Handshake& h, Deadline deadline);
  Status open_incoming(Handshake& h, Deadline deadline);
  Status await_mapped(Handshake& h, Deadline deadline);
  Status probe_single_copy(Handshake& h);
  Result<bootstrap::Bytes> wait_for_key(const std::string& key, const Handshake* h,
                                        Deadline deadline, int peer = -1);
  Status check_peer(const Handshake& h) const;
  Status check_others() const;
  Status exited(const Handshake& h) const;
  Result<Mapping> create_arena(const ArenaGeometry& g, const Card& mine,
                               const std::vector<Card>& cards, bool by_fd, Deadline deadline);
  Result<Mapping> open_arena(const ArenaGeometry& g, const Card& owner, bool by_fd,
                             Deadline deadline);
  [[nodiscard]] bool setup_done(const Handshake& h) const;
  [[nodiscard]] std::string key(int from, int to) const;
  [[nodiscard]] std::string card_key(int rank) const;
  /// peer_check_, asked at most every 5 s (it may ask the store: the loops that wait here look
  /// at the peers' processes every 100 ms, and the store ends a wait when a client vanishes).
  [[nodiscard]] Status known_failure(int peer) const;
  /// peer_check_ asked every 20 ms for up to 2 s (or the deadline): its failure, once shared.
  [[nodiscard]] Status await_shared_failure(int peer, Deadline deadline) const;

  int rank_;
  int nranks_;
  std::uint64_t comm_id_;
  std::shared_ptr<bootstrap::Store> store_;
  ChannelGeometry geometry_;
  ShmOptions options_;
  PlanHints hints_;
  std::shared_ptr<Doorbell> bell_;
  std::unique_ptr<FdMailbox> mailbox_;  // null: named segments
  std::vector<std::unique_ptr<ShmConnection>> conns_;
  std::function<Status(int)> peer_check_;
  mutable std::chrono::steady_clock::time_point peer_checked_{};
  std::string nonce_;  // names the channels this rank sends on; empty until its card is published
  std::vector<std::optional<Card>> cards_;              // the peers' cards, once read
  const std::vector<Handshake>* setting_up_ = nullptr;  // during ensure(): its handshakes
};

}  // namespace loom::transport::shm
