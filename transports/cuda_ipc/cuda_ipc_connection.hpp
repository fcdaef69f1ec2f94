// A Connection between device buffers of two ranks on one host (see fifo.hpp). Every device
// operation (the sender's copy into its FIFO slot, the receiver's copy or reduction out of the
// peer's slot) is enqueued on the communicator's device stream, the same stream the executor's
// local copies and reductions use, so the stream's order is the plan's order. Nothing here
// blocks: test() polls events and the shared counters.
#pragma once

#include <array>
#include <deque>
#include <string>

#include "device_api/device.hpp"
#include "device_api/ipc_peers.hpp"
#include "transports/connection.hpp"
#include "transports/cuda_ipc/fifo.hpp"

namespace loom::transport::cuda_ipc {

/// The two FIFOs of a pair, as this rank sees them (addresses usable by device copies and
/// kernels on this rank's device).
struct FifoPair {
  ControlBlock* out_control = nullptr;  // ours: we publish, the peer consumes
  std::uint8_t* out_data = nullptr;
  ControlBlock* in_control = nullptr;  // the peer's: it publishes, we consume
  const std::uint8_t* in_data = nullptr;
  /// The transport's record of a rank whose failure this rank saw (-1: none), written into the
  /// control blocks on close.
  const std::atomic<int>* seen_failure = nullptr;
  std::size_t slot_bytes = kDefaultSlotBytes;  // both ways (the transport checks they agree)
};

class CudaIpcConnection final : public Connection {
 public:
  static Result<std::unique_ptr<CudaIpcConnection>> create(device::Device& dev,
                                                           device::Stream stream, int self,
                                                           int peer, device::PeerRoute route,
                                                           FifoPair fifos);
  ~CudaIpcConnection() override;  // marks both FIFOs closed; the peer's pending requests fail
  CudaIpcConnection(const CudaIpcConnection&) = delete;
  CudaIpcConnection& operator=(const CudaIpcConnection&) = delete;

  [[nodiscard]] Caps caps() const override {
    Caps c;
    c.host_memory = false;
    c.device_memory = true;
    c.stream_ordered = true;
    return c;
  }
  [[nodiscard]] int peer() const override { return peer_; }
  [[nodiscard]] std::string name() const override { return "cuda_ipc"; }
  [[nodiscard]] device::PeerRoute route() const { return route_; }

  Result<Request> isend(const MemRegion& region, std::size_t off, std::size_t len,
                        const Tag& tag) override;
  Result<Request> irecv(const MemRegion& region, std::size_t off, std::size_t len,
                        const Tag& tag) override;
  [[nodiscard]] bool supports_recv_reduce() const override { return true; }
  /// The reduction kernel reads the incoming operand straight from the peer's FIFO slot.
  Result<Request> irecv_reduce(const ReduceInto& into, std::size_t len, const Tag& tag) override;
  Result<bool> test(const Request& request) override;
  /// Nothing to poll(2) on: while a request is pending, asks for a timed wake-up.
  bool prepare_wait(std::vector<pollfd>& fds) override;
  /// Pieces copied, published, taken and retired so far: a message moves piece by piece.
  [[nodiscard]] std::uint64_t moved() const override {
    return copied_ + published_ + taken_ + retired_;
  }
  /// The FIFO counters both ways, and what the oldest unfinished piece waits for.
  [[nodiscard]] std::string state() const override;

 private:
  struct Op {
    std::uint64_t id = 0;
    bool reduce = false;
    std::uint8_t* dst = nullptr;  // send: the source
    const std::uint8_t* local = nullptr;
    DataType dtype = DataType::Uint8;
    RedOp redop = RedOp::Sum;
    std::size_t len = 0;
    Tag tag;
    std::uint64_t next_piece = 0;  // pieces enqueued so far
    std::uint64_t last_seq = 0;    // FIFO sequence number just after its last piece
    bool done = false;
  };
  CudaIpcConnection(device::Device& dev, device::Stream stream, int self, int peer,
                    device::PeerRoute route, FifoPair fifos)
      : dev_(dev), stream_(stream), self_(self), peer_(peer), route_(route), fifos_(fifos) {}

  Op new_op(std::uint8_t* dst, std::size_t len, const Tag& tag, std::uint64_t& end);
  Result<Request> queue(bool send, const Op& op);
  Status progress();
  Status progress_sends();
  Status progress_recvs();
  Status take_piece(Op& op, std::uint64_t seq);
  Status check_peer_open(bool sending) const;

  device::Device& dev_;
  device::Stream stream_;
  int self_;
  int peer_;
  device::PeerRoute route_;
  FifoPair fifos_;
  std::array<device::Event, kSlots> send_events_{};
  std::array<device::Event, kSlots> recv_events_{};
  std::deque<Op> sends_;
  std::deque<Op> recvs_;
  std::uint64_t next_id_ = 1;
  std::uint64_t copied_ = 0;     // send pieces enqueued
  std::uint64_t published_ = 0;  // send pieces published
  std::uint64_t taken_ = 0;      // receive pieces enqueued
  std::uint64_t retired_ = 0;    // receive pieces consumed
  std::uint64_t send_end_ = 0;   // pieces of every message posted so far, each way (new_op)
  std::uint64_t recv_end_ = 0;
};

}  // namespace loom::transport::cuda_ipc
