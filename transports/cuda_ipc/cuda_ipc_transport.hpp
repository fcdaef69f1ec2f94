// The cuda_ipc transport: connections between device buffers of ranks on one host (see fifo.hpp
// for the wire format). Created when a device runtime is active (for a communicator that spans
// hosts, only when the network carries device buffers too: see device/direct_path.hpp); each
// rank allocates one device FIFO region per peer on its host, exports it
// with a CUDA IPC handle through the bootstrap store (device::IpcPeers) and learns, per peer,
// whether peer access holds both ways (route p2p: read the peer's FIFO straight from its GPU) or
// not (route host-staging: the FIFO data sits in pinned host shared memory instead).
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bootstrap/store.hpp"
#include "device_api/device.hpp"
#include "device_api/ipc_peers.hpp"
#include "transports/cuda_ipc/cuda_ipc_connection.hpp"
#include "transports/cuda_ipc/peer_board.hpp"
#include "transports/device_transport.hpp"
#include "transports/shm/shm_segment.hpp"

namespace loom::transport::cuda_ipc {

struct CudaIpcSetup {
  device::Device* dev = nullptr;
  std::shared_ptr<bootstrap::Store> store;
  std::string prefix;  // the communicator's store prefix
  std::uint64_t comm_id = 0;
  int rank = 0;
  int nranks = 1;
  std::string host_id;  // equal on ranks that share a host
  bool allowed = true;  // this rank's LOOM_TRANSPORTS lets device buffers use cuda_ipc
  /// Every rank's host id when the ranks span hosts (empty: all on `host_id`). FIFOs exist only
  /// between ranks of one host; the others are the network's.
  std::vector<std::string> host_ids;
  std::string nvml_library = "libnvidia-ml.so.1";  // LOOM_NVML_LIBRARY: labels the links in logs
  std::size_t slot_bytes = kDefaultSlotBytes;      // LOOM_CUDA_IPC_SLOT_SIZE (alike on every rank)
  bool stages = false;  // LOOM_CUDA_IPC_ROUTE=staged: host staging to every peer (and theirs to us)
  PeerReadMode peer_read = PeerReadMode::Auto;  // LOOM_CUDA_IPC_PEER_READ
};

class CudaIpcTransport final : public DeviceTransport {
 public:
  /// Collective: every rank of the communicator calls it (with `allowed` from its own
  /// LOOM_TRANSPORTS). Null, with the reason logged at INFO, when some rank excludes cuda_ipc.
  static Result<std::unique_ptr<CudaIpcTransport>> create(const CudaIpcSetup& setup,
                                                          Deadline deadline);
  ~CudaIpcTransport() override;
  CudaIpcTransport(const CudaIpcTransport&) = delete;
  CudaIpcTransport& operator=(const CudaIpcTransport&) = delete;

  /// Connections to every peer in `peers` (pairwise handshakes through the store).
  Status ensure(const std::vector<int>& peers, Deadline deadline) override;
  [[nodiscard]] Connection* get(int peer) const override;
  [[nodiscard]] std::string_view name() const override { return "cuda_ipc"; }
  [[nodiscard]] device::PeerRoute route(int peer) const;
  [[nodiscard]] device::Device& device() const override { return dev_; }
  /// The one stream every device operation of this communicator is ordered on.
  [[nodiscard]] device::Stream stream() const override { return stream_; }
  [[nodiscard]] int device_ordinal() const override { return my_device_; }
  [[nodiscard]] int rank() const override { return rank_; }
  /// This rank saw `rank` fail (thread-safe, non-blocking): peers whose pending requests fail
  /// because we close our ends afterwards are told that rank, the cause, not us.
  void note_failure(int rank) override {
    int none = -1;
    seen_failure_.compare_exchange_strong(none, rank);  // the first one seen is the cause
  }
  [[nodiscard]] int failed_rank() const override { return seen_failure_.load(); }
  [[nodiscard]] PeerBoard* peer_board() const override { return board_.get(); }

 private:
  struct Peer {
    shm::CreatedSegment out;  // our control block (+ staged data)
    shm::Mapping in;          // the peer's
    void* out_registered = nullptr;
    void* in_registered = nullptr;
    std::unique_ptr<CudaIpcConnection> conn;
  };
  CudaIpcTransport(const CudaIpcSetup& setup, int my_device);
  Status publish(int peer);
  Status open_incoming(int peer, Deadline deadline);
  [[nodiscard]] std::string key(int from, int to) const;
  /// Offset of the FIFO to `to` in `from`'s FIFO region (both on this host).
  [[nodiscard]] std::size_t fifo_offset(int to) const;
  [[nodiscard]] std::size_t fifo_bytes() const { return kSlots * slot_bytes_; }
  Status check_slot_size(int peer, std::size_t peer_slot_bytes) const;

  std::atomic<int> seen_failure_{-1};
  device::Device& dev_;
  std::shared_ptr<bootstrap::Store> store_;
  std::string prefix_;
  std::uint64_t comm_id_;
  int rank_;
  int nranks_;
  int my_device_;
  std::size_t slot_bytes_;
  device::Stream stream_ = nullptr;
  std::vector<int> local_index_;  // by rank: position among this host's ranks (-1: elsewhere)
  void* fifo_memory_ = nullptr;   // fifo_bytes() per rank of this host: our FIFO to each
  std::optional<device::IpcPeers> ipc_;
  std::vector<Peer> peers_;
  std::unique_ptr<ShmPeerBoard> board_;  // the peer-read route's, when every rank agreed
};

/// "device buffers to rank 3 via cuda_ipc (p2p, devices 0 -> 1, link nvlink)": the INFO line
/// of the per-peer choice.
std::string describe_route(int rank, int peer, const device::PeerBuffer& p, int my_device,
                           const std::string& link);

}  // namespace loom::transport::cuda_ipc
