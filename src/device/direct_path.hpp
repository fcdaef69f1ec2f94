// Collectives on device buffers without host staging: the plan runs on the device buffers
// themselves. Messages to ranks on this host go over the cuda_ipc transport (read straight from
// the peer's GPU with peer access, through pinned host shared memory without); messages to other
// hosts, when the ranks span hosts, over the network transport straight from device memory (ofi
// with FI_HMEM: see core/device_network.hpp). Every local copy and reduction is a kernel of
// kernels/cuda launched through the device seam. All of it is ordered on the cuda_ipc
// transport's one device stream; the network reads and writes device memory itself, so the
// executor fences it against that stream (exec::LocalOps). The caller's stream is joined by the
// same inputs-ready event and gate as the staged path (stream_path.hpp).
// Where every rank agreed on it (cuda_ipc's board), allreduce, allgather, reduce_scatter,
// broadcast and reduce take the peer-read route instead (peer_read.hpp): every rank reads the
// others' buffers in place, ordered on the GPU, with the plan's FIFO task as its fallback.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "algorithms/plan.hpp"
#include "collective/op.hpp"
#include "device/peer_read.hpp"
#include "executor/task.hpp"
#include "transports/device_transport.hpp"
#include "transports/registry.hpp"

namespace loom::device {

class DirectPath {
 public:
  /// Collective over the store when `ctx.device` is set: creates the cuda_ipc transport through
  /// `registry` from `ctx` (ctx.host_ids every rank's, ctx.allowed this rank's LOOM_TRANSPORTS
  /// say). When the hosts differ, `network` (every rank agreed it carries device memory)
  /// reaches the other hosts. Null when there is no device, when the ranks span hosts without a
  /// `network`, or when some rank's LOOM_TRANSPORTS excludes cuda_ipc.
  static Result<std::unique_ptr<DirectPath>> create(
      const transport::CreateContext& ctx, transport::ConnectionSet* network,
      const transport::Registry& registry = transport::builtin_transports());
  DirectPath(std::unique_ptr<transport::DeviceTransport> transport,
             transport::ConnectionSet* network, std::vector<bool> local,
             std::unique_ptr<PeerReadRoute> route = nullptr)
      : transport_(std::move(transport)),
        network_(network),
        local_(std::move(local)),
        route_(std::move(route)) {}
  ~DirectPath();
  DirectPath(const DirectPath&) = delete;
  DirectPath& operator=(const DirectPath&) = delete;

  /// The cuda_ipc transport.
  [[nodiscard]] transport::DeviceTransport& transport() const { return *transport_; }
  /// Connections to `peers`: cuda_ipc on this host, the network elsewhere.
  Result<std::vector<transport::Connection*>> connect(const std::vector<int>& peers, int nranks,
                                                      Deadline deadline);
  /// Whether some peer is reached over the network (the buffers need allocation ids then).
  [[nodiscard]] bool spans_hosts() const { return network_ != nullptr; }
  /// The collective `op` (device pointers) as an engine task; `on_done` runs once it has
  /// completed, results in place. `window` as for exec::PlanRun.
  std::unique_ptr<exec::Task> task(const coll::OpDesc& op, std::shared_ptr<const algo::Plan> plan,
                                   int nranks, std::size_t window, Deadline deadline,
                                   std::function<void()> on_done);
  /// Whether `op` takes the peer-read route (every rank decides alike).
  [[nodiscard]] bool reads_in_place(const coll::OpDesc& op) const {
    return route_ && peer_read_serves(op);
  }
  /// `op` on the peer-read route: enqueues its part on `stream` and returns its task
  /// (PeerReadRoute::submit); `plan` and `window` make the FIFO task it falls back to.
  Result<std::unique_ptr<exec::Task>> read_in_place(const coll::OpDesc& op, Stream stream,
                                                    std::shared_ptr<const algo::Plan> plan,
                                                    int nranks, std::size_t window,
                                                    Deadline deadline,
                                                    std::function<void()> on_done);
  /// Device scratch of at least `bytes` (one at a time: the engine runs one task at a time).
  /// It grows by powers of two; a buffer it outgrows is freed only with the path: a free
  /// (cudaFree) waits for the whole device, and a caller's stream may be held by this very
  /// collective (its stream gate), so a free here could never return.
  Result<std::uint8_t*> scratch(std::size_t bytes);
  /// Grows the scratch to `bytes` now, on the calling thread: the submitting thread calls it
  /// before it enqueues the call's stream gate, so that no allocation (cudaMalloc) happens on
  /// the engine's thread while a gate holds the caller's stream (on the legacy default stream,
  /// torch's, an allocation could wait for that gate: the collective would never finish).
  Status reserve_scratch(std::size_t bytes);

 private:
  std::mutex scratch_mu_;  // reserve_scratch (a submitting thread) against scratch (the engine)
  std::unique_ptr<transport::DeviceTransport> transport_;
  transport::ConnectionSet* network_;  // other hosts (null: every rank on this host)
  std::vector<bool> local_;            // by rank: on this host
  void* scratch_ = nullptr;
  std::size_t scratch_bytes_ = 0;
  std::vector<void*> outgrown_;           // earlier scratch buffers, freed with the path
  std::unique_ptr<PeerReadRoute> route_;  // null: the FIFOs carry every call
};

}  // namespace loom::device
