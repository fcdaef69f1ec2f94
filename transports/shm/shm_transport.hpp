// Sets up ShmConnections between ranks on one host. Each rank owns a doorbell; for every pair,
// each side creates the channel segment it sends on and publishes its (unguessable) name through
// the bootstrap store; the receiver maps it and acknowledges; the name is then unlinked at once,
// so nothing is left in /dev/shm even if a process is killed later. Connections are made on
// first use: both ranks call ensure() for each other at about the same time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "bootstrap/store.hpp"
#include "common/deadline.hpp"
#include "transports/shm/shm_connection.hpp"
#include "transports/shm/single_copy.hpp"

namespace loom::transport::shm {

struct ShmOptions {
  std::size_t slot_bytes = 256 << 10;  // rounded up to a multiple of 64
  std::size_t nslots = 8;
  SingleCopy single_copy = SingleCopy::Auto;  // LOOM_SHM_SINGLE_COPY
  std::size_t single_copy_min = 64 << 10;     // messages this large (and larger) use it
  SlotOrder slot_order = SlotOrder::Auto;     // LOOM_SHM_SLOT_ORDER (Auto here: Rotate)
};

/// Parses LOOM_SHM_SLOT_ORDER: auto, reuse or rotate.
Result<SlotOrder> parse_slot_order(std::string_view text);

class ShmTransport {
 public:
  static Result<std::unique_ptr<ShmTransport>> create(int rank, int nranks, std::uint64_t comm_id,
                                                      std::shared_ptr<bootstrap::Store> store,
                                                      ShmOptions options);
  ~ShmTransport();
  ShmTransport(const ShmTransport&) = delete;
  ShmTransport& operator=(const ShmTransport&) = delete;

  /// Connections to `peers`, establishing missing ones in three phases over all of them (create
  /// and publish every outgoing channel; map every incoming one; wait for every acknowledgement),
  /// so no two ranks wait on each other. On failure, whatever this call created is unlinked.
  Status ensure(const std::vector<int>& peers, Deadline deadline);
  /// The connection to `peer` (null if not established).
  [[nodiscard]] Connection* get(int peer) const;
  /// The abstract socket name of this rank's doorbell.
  [[nodiscard]] const std::string& doorbell_name() const;
  /// What ensure() asks, at least every 100 ms while it waits for a peer, whether that peer is
  /// known to have failed (a non-ok status ends the wait with it). None: wait until the deadline.
  void set_peer_check(std::function<Status(int peer)> check) { peer_check_ = std::move(check); }

 private:
  struct Handshake;

  ShmTransport(int rank, int nranks, std::uint64_t comm_id, std::shared_ptr<bootstrap::Store> store,
               ChannelGeometry geometry, ShmOptions options, std::shared_ptr<Doorbell> doorbell);
  Status publish(Handshake& h);
  Status open_incoming(Handshake& h, Deadline deadline);
  Status await_mapped(Handshake& h, Deadline deadline);
  Status probe_single_copy(Handshake& h);
  Result<bootstrap::Bytes> wait_for_key(const std::string& key, int peer, Deadline deadline);
  [[nodiscard]] std::string key(int from, int to) const;

  int rank_;
  int nranks_;
  std::uint64_t comm_id_;
  std::shared_ptr<bootstrap::Store> store_;
  ChannelGeometry geometry_;
  ShmOptions options_;
  std::shared_ptr<Doorbell> bell_;
  std::vector<std::unique_ptr<ShmConnection>> conns_;
  std::function<Status(int)> peer_check_;
};

}  // namespace loom::transport::shm
