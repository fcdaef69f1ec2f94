// CUDA IPC handle exchange through the bootstrap store, and peer-access probing: the component
// an intra-node device transport (transports/cuda_ipc) builds on. Each rank exports one device
// buffer; every rank on the same host learns whether it can read/write that buffer directly
// (cudaDeviceCanAccessPeer; then it is mapped here with cudaIpcOpenMemHandle) or must stage
// through pinned host shared memory.
#pragma once

#include <string>
#include <vector>

#include "bootstrap/store.hpp"
#include "device_api/device.hpp"

namespace loom::device {

enum class PeerRoute : std::uint8_t {
  Self,         // this rank's own buffer
  PeerToPeer,   // same host, peer access on: `mapped` is the peer's buffer, usable on our device
  HostStaging,  // same host, no peer access (or same device): stage through pinned host memory
  Remote,       // another host: the network transport's business
};
std::string_view to_string(PeerRoute r) noexcept;

/// What each rank publishes in the exchange.
struct IpcRecord {
  std::uint32_t pid = 0;
  std::int32_t device = -1;  // the ordinal in its own process (for the logs)
  IpcHandle handle;
  bool allows_direct = true;  // its LOOM_TRANSPORTS lets device buffers use cuda_ipc
  bool stages = false;        // its LOOM_CUDA_IPC_ROUTE=staged: host staging to every peer
  std::string host;
  std::string bus_id;                // its GPU's PCI address: names the GPU across processes
  std::vector<std::string> visible;  // PCI addresses of every GPU its process can see
};
bootstrap::Bytes encode(const IpcRecord& r);
Result<IpcRecord> decode_ipc_record(const bootstrap::Bytes& b, int rank);

struct PeerBuffer {
  int rank = 0;
  int device = -1;     // the peer's device ordinal in its own process
  std::string bus_id;  // the peer's GPU (PCI address)
  PeerRoute route = PeerRoute::Remote;
  void* mapped = nullptr;  // Self and PeerToPeer only
  bool allows_direct = true;
  std::string why;  // HostStaging: why not PeerToPeer, for the logs  // the rank lets device
                    // buffers use cuda_ipc (LOOM_TRANSPORTS)
};

class IpcPeers {
 public:
  /// Publishes this rank's IpcRecord (IPC handle of `buffer`) under `prefix`, reads every
  /// other rank's, probes peer access and maps the peer buffers that can be reached directly.
  /// GPUs are matched by PCI address, not ordinal (processes may see different GPUs). Peer
  /// access needs each GPU visible to the other's process and cudaDeviceCanAccessPeer both
  /// ways, so that both ranks of a pair reach the same route. When some rank does not allow direct
  /// access, routes are still reported but nothing is mapped (that rank may free its buffer at
  /// once).
  static Result<IpcPeers> exchange(Device& dev, bootstrap::Store& store, const std::string& prefix,
                                   int rank, int nranks, const std::string& host, int my_device,
                                   void* buffer, Deadline deadline, bool allows_direct = true,
                                   bool stages = false);
  IpcPeers(IpcPeers&& o) noexcept : dev_(o.dev_), peers_(std::move(o.peers_)) { o.dev_ = nullptr; }
  IpcPeers& operator=(IpcPeers&&) = delete;
  IpcPeers(const IpcPeers&) = delete;
  IpcPeers& operator=(const IpcPeers&) = delete;
  ~IpcPeers();  // closes the mapped handles

  [[nodiscard]] const PeerBuffer& peer(int rank) const {
    return peers_.at(static_cast<std::size_t>(rank));
  }
  [[nodiscard]] int size() const { return static_cast<int>(peers_.size()); }

 private:
  IpcPeers(Device& dev, std::vector<PeerBuffer> peers) : dev_(&dev), peers_(std::move(peers)) {}
  Device* dev_;
  std::vector<PeerBuffer> peers_;
};

}  // namespace loom::device
