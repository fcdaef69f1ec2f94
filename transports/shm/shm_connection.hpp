// A Connection to a peer on the same host through two shared-memory channels (one per direction).
// Sends copy into the outgoing ring as space allows; receives validate each message's tag and
// length before copying (or reducing) straight out of the incoming ring. Nothing blocks or spins
// here: the executor polls the rank's doorbell, which the peer rings when it publishes data or
// frees space while this side sleeps.
#pragma once

#include <deque>
#include <memory>
#include <vector>

#include "common/process.hpp"
#include "transports/connection.hpp"
#include "transports/request_table.hpp"
#include "transports/shm/channel.hpp"
#include "transports/shm/doorbell.hpp"
#include "transports/shm/peer_buffers.hpp"
#include "transports/shm/shm_policy.hpp"
#include "transports/shm/single_copy.hpp"

namespace loom::transport::shm {

/// Whether single-copy reads are used on a connection (see single_copy.hpp).
struct SingleCopyParams {
  bool read_peer = false;                 // we may read the peer's buffers (incoming messages)
  std::uint32_t peer_reads = kReadsNone;  // which of ours the peer reads (SingleCopyReads)
  std::size_t min_bytes = 64 << 10;
  SingleCopyMax max_bytes{256 << 10, 256 << 10};  // without kReadsAnySize
  bool map_peer = false;   // we may map the peer's shared (loom::host_alloc) buffers
  bool peer_maps = false;  // the peer maps ours
};

/// What connection setup learned about the peer.
struct ShmPeer {
  int rank = -1;
  DoorbellAddress doorbell;
  proc::PeerProcess process;
};

class ShmConnection final : public Connection {
 public:
  ShmConnection(int self_rank, ShmPeer peer, Channel out, Channel in,
                std::shared_ptr<Doorbell> doorbell, SingleCopyParams single_copy = {},
                bool reuse_drained_slots = false);
  /// Marks both channels closed and rings the peer, whose pending requests then fail.
  ~ShmConnection() override;
  ShmConnection(const ShmConnection&) = delete;
  ShmConnection& operator=(const ShmConnection&) = delete;

  [[nodiscard]] Caps caps() const override {
    Caps c;
    c.direct_load_store = true;
    c.peeks = true;
    return c;
  }
  [[nodiscard]] int peer() const override { return peer_.rank; }
  [[nodiscard]] std::string name() const override { return "shm"; }
  Result<Request> isend(const MemRegion& region, std::size_t off, std::size_t len,
                        const Tag& tag) override;
  Result<Request> isend_buffered(const MemRegion& region, std::size_t off, std::size_t len,
                                 const Tag& tag) override;
  Result<Request> irecv(const MemRegion& region, std::size_t off, std::size_t len,
                        const Tag& tag) override;
  [[nodiscard]] bool supports_recv_reduce() const override { return true; }
  Result<Request> irecv_reduce(const ReduceInto& into, std::size_t len, const Tag& tag) override;
  Result<bool> test(const Request& request) override;
  std::optional<Unread> peek_unread() override;
  bool prepare_wait(std::vector<pollfd>& fds) override;

 private:
  // `may_single_copy`: large messages may be read by the peer from `region` (isend); false
  // copies every message through the channel's slots (isend_buffered).
  Result<Request> post_send(const MemRegion& region, std::size_t off, std::size_t len,
                            const Tag& tag, bool may_single_copy);
  enum class OpKind : std::uint8_t { Send, Recv, RecvReduce };
  struct Op {
    std::uint64_t id = 0;  // 0: free
    OpKind kind = OpKind::Send;
    bool started = false;  // send: a fragment was written; recv: the first one was validated
    bool complete = false;
    bool single_copy = false;         // send: published as one single-copy descriptor
    shared_buffers::Location shared;  // single-copy send from a loom::host_alloc buffer
    std::uint64_t slot = 0;        // single-copy send: its ring position (done once tail passes it)
    std::uint8_t* data = nullptr;  // send: source; recv: destination
    const std::uint8_t* local = nullptr;  // RecvReduce: the local operand
    DataType dtype = DataType::Uint8;
    RedOp redop = RedOp::Sum;
    std::size_t len = 0;
    std::size_t done = 0;
    Tag tag;
  };

  [[nodiscard]] bool peer_reads_in_place(std::size_t len, const Tag& tag) const;
  Result<Op*> allocate(OpKind kind);
  void touch();
  Status progress_send();
  Status progress_recv();
  Status consume(Op& op, const SlotDesc& d, const std::uint8_t* payload);
  Status read_peer(Op& op, const SlotDesc& d);
  Status read_mapped(Op& op, const SlotDesc& d);
  Status read_outcome(Op& op, Status st);
  bool sender_withdrew();
  std::uint64_t payload_base();
  void publish(Op& op, std::size_t n);
  void check_acks();
  [[nodiscard]] bool send_ready(const ChannelHeader& h) const;
  Status check_fragment(const Op& op, const SlotDesc& d) const;
  [[nodiscard]] bool incoming_empty();
  void wake_peer(std::atomic<std::uint32_t>& sleeping) const;
  void disarm();
  Status peer_gone(const Op& op) const;
  Status fail(Status why);
  [[nodiscard]] std::string who() const;

  int self_;
  ShmPeer peer_;
  Channel out_;
  Channel in_;
  std::shared_ptr<Doorbell> bell_;
  RequestTable<Op> ops_;
  std::deque<Op*> sendq_;
  std::deque<Op*> acks_;  // single-copy sends published, waiting for the peer to read them
  std::deque<Op*> recvq_;
  std::uint64_t head_ = 0;       // outgoing: slots published (we are the only producer)
  std::uint64_t tail_seen_ = 0;  // outgoing: the consumer's tail as last read
  std::uint64_t base_ = 0;       // outgoing: the position whose payload is slot 0
  std::uint64_t tail_ = 0;       // incoming: slots consumed (we are the only consumer)
  std::uint64_t head_seen_ = 0;  // incoming: the producer's head as last read
  bool armed_recv_ = false;      // we set in_.receiver_sleeping
  bool armed_send_ = false;      // we set out_.sender_sleeping
  bool peer_exited_ = false;
  SingleCopyParams single_copy_;
  bool reuse_drained_slots_;          // SlotOrder::Reuse
  std::vector<std::uint8_t> bounce_;  // single-copy receive-reduce: a cache-sized staging buffer
  PeerBuffers peer_buffers_;          // the peer's shared buffers, mapped
  Status broken_;
};

}  // namespace loom::transport::shm
