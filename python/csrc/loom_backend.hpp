// ProcessGroupLoom: the c10d backend "loom" (torch.distributed.init_process_group("loom")).
//
// Rendezvous as ProcessGroupNCCL does it: rank 0 of the group creates a loom::UniqueId (which
// starts loom's rendezvous server on a free port with a fresh secret) and publishes its bytes in
// the c10d Store torch gives the group; the other ranks read them and every rank constructs
// loom::Communicator(id, rank, size, options). Subgroups get their own store prefix from torch,
// hence their own id and communicator.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <loom/communicator.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

#include "loom_work.hpp"

namespace loom_torch {

/// What init_process_group / new_group hand the backend, plus loom's own knobs.
struct BackendConfig {
  std::chrono::milliseconds timeout{std::chrono::minutes(30)};
  std::map<std::string, std::string> settings;  // LOOM_* overrides (CommOptions::settings)
  std::optional<bool> deterministic;
  std::string group_name;  // for messages
  /// The CUDA device whose tensors this group serves (the current device at creation, made
  /// current while the communicator is created, as loom asks); -1: host tensors only.
  int cuda_device = -1;
};

class ProcessGroupLoom : public c10d::Backend {
 public:
  ProcessGroupLoom(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                   BackendConfig config);
  ~ProcessGroupLoom() override;

  const std::string getBackendName() const override { return "loom"; }
  c10::intrusive_ptr<Options> getBackendOptions() override;
  void setTimeout(std::chrono::milliseconds timeout) override;
  uint64_t getSequenceNumberForGroup() override { return seq_; }
  void abort() override;
  void shutdown() override;

  // Collectives loom has.
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  /// dist.monitored_barrier (loom_monitored_barrier.cpp): through the group's store.
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) override;

  // Coalescing (batch_isend_irecv, torch's _coalescing_manager): the calls between
  // startCoalescing and endCoalescing form one loom group (sends and receives side by side,
  // allreduces fused); endCoalescing's Work completes when all of them have.
  bool supportsCoalescing() const override { return true; }
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

  // All-to-all, gather/scatter and point-to-point (loom_exchange.cpp).
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;

  /// loom's one-line status of this group's communicator (last op, failures, lagging ranks).
  std::string loom_status() const;
  std::string flight_record() const;
  std::vector<int> failed_ranks() const;

 private:
  using Issue =
      std::function<void(loom::Communicator&, const loom::CollOptions&, std::vector<loom::Work>&)>;
  /// Runs `issue` under the issue lock (loom takes calls from one thread at a time) and wraps
  /// what it issued in a LoomWork that keeps op.keep_alive and op.outputs alive.
  c10::intrusive_ptr<c10d::Work> launch(IssuedOp op, std::chrono::milliseconds timeout,
                                        const Issue& issue);
  /// Settles finished works at the front of the in-flight queue (they finish in order).
  void reap_locked();
  /// Waits for (and settles) every in-flight work.
  void drain();
  loom::CollOptions call_options(std::chrono::milliseconds timeout) const;
  /// Device tensors: checks the op's device is this group's, makes the loom calls ordered on
  /// the device's current stream (op.stream, co.stream) and records their tensors' use there.
  void order_on_stream(IssuedOp& op, loom::CollOptions& co) const;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_one(const char* name, c10d::OpType type,
                                                    at::Tensor output, at::Tensor input,
                                                    const c10d::ReduceScatterOptions& opts);
  c10::intrusive_ptr<c10d::Work> allgather_one(const char* name, c10d::OpType type,
                                               at::Tensor output, at::Tensor input,
                                               const c10d::AllgatherOptions& opts);
  /// all_reduce of a sparse COO tensor on the host (loom_sparse.cpp): SUM and AVG.
  c10::intrusive_ptr<c10d::Work> allreduce_sparse_host(at::Tensor& tensor,
                                                       const c10d::AllreduceOptions& opts);

  BackendConfig config_;
  c10::intrusive_ptr<c10d::Store> store_;  // the group's (prefixed) store: monitoredBarrier
  uint64_t monitored_barriers_ = 0;        // names each monitoredBarrier's keys
  std::optional<std::chrono::milliseconds> call_timeout_;  // setTimeout()
  mutable std::mutex mu_;                                  // issue lock: comm_ calls and inflight_
  std::shared_ptr<loom::Communicator> comm_;               // shared: failure_context reads it
  std::deque<c10::intrusive_ptr<LoomWork>> inflight_;
  struct Coalesced {
    std::vector<loom::Work> works;
    c10::intrusive_ptr<LoomWork> work;
  };
  bool coalescing_ = false;           // between startCoalescing and endCoalescing (under mu_)
  std::vector<Coalesced> coalesced_;  // what was issued there
  std::shared_ptr<CompletionWatcher> watcher_;
  uint64_t seq_ = 0;
};

}  // namespace loom_torch
