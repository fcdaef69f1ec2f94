// Collectives on device buffers of ranks on one host, without host staging: the plan runs on the
// device buffers themselves, messages go over the cuda_ipc transport (read straight from the
// peer's GPU with peer access, through pinned host shared memory without), and every local copy
// and reduction is a kernel of kernels/cuda launched through the device seam. All of it is
// ordered on the transport's one device stream; the caller's stream is joined by the same
// inputs-ready event and gate as the staged path (stream_path.hpp).
#pragma once

#include <functional>
#include <memory>

#include "algorithms/plan.hpp"
#include "core/op.hpp"
#include "executor/task.hpp"
#include "transports/cuda_ipc/cuda_ipc_transport.hpp"

namespace loom::device {

class DirectPath {
 public:
  /// Collective over the store when `dev` is set and every rank is on one host (`host_ids` by
  /// rank): creates the cuda_ipc transport. Null when the ranks span hosts, when `dev` is null,
  /// or when some rank's LOOM_TRANSPORTS excludes cuda_ipc (`allowed` is this rank's say).
  static Result<std::unique_ptr<DirectPath>> create(Device* dev,
                                                    std::shared_ptr<bootstrap::Store> store,
                                                    const std::string& prefix,
                                                    std::uint64_t comm_id, int rank,
                                                    const std::vector<std::string>& host_ids,
                                                    bool allowed, Deadline deadline);
  explicit DirectPath(std::unique_ptr<transport::cuda_ipc::CudaIpcTransport> transport)
      : transport_(std::move(transport)) {}
  ~DirectPath();
  DirectPath(const DirectPath&) = delete;
  DirectPath& operator=(const DirectPath&) = delete;

  [[nodiscard]] transport::cuda_ipc::CudaIpcTransport& transport() const { return *transport_; }
  /// The collective `op` (device pointers) as an engine task; `on_done` runs once it has
  /// completed, results in place. `window` as for exec::PlanRun.
  std::unique_ptr<exec::Task> task(const core::OpDesc& op, std::shared_ptr<const algo::Plan> plan,
                                   int nranks, std::size_t window, Deadline deadline,
                                   std::function<void()> on_done);
  /// Device scratch of at least `bytes` (one at a time: the engine runs one task at a time).
  Result<std::uint8_t*> scratch(std::size_t bytes);

 private:
  std::unique_ptr<transport::cuda_ipc::CudaIpcTransport> transport_;
  void* scratch_ = nullptr;
  std::size_t scratch_bytes_ = 0;
};

}  // namespace loom::device
