// Executes one Plan over Connections and the host reduction kernels, without blocking.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/plan.hpp"
#include "core/op.hpp"
#include "executor/task.hpp"
#include "transports/connection.hpp"

namespace loom::exec {

struct PlanBuffers {
  std::uint8_t* send = nullptr;
  std::uint8_t* recv = nullptr;
  std::uint8_t* scratch = nullptr;
};

/// Where the local steps (Copy, Reduce) run. By default on the host, synchronously; device
/// buffers give an implementation that enqueues them on the device stream the transport also
/// uses, so that the stream's order is the plan's order.
class LocalOps {
 public:
  virtual ~LocalOps() = default;
  virtual Status copy(void* dst, const void* src, std::size_t bytes) = 0;
  virtual Status reduce(DataType dtype, RedOp op, void* dst, const void* a, const void* b,
                        std::size_t count) = 0;
};

class PlanRun {
 public:
  /// `conns[peer]` must be non-null for every peer the plan talks to. `window` bounds the
  /// requests in flight per (peer, direction). `local` null: local steps run on the host.
  PlanRun(const algo::Plan& plan, PlanBuffers bufs, const core::OpDesc& op, int rank,
          std::vector<transport::Connection*> conns, std::size_t window, LocalOps* local = nullptr);

  Result<Progress> progress();
  /// See Connection::prepare_wait; false means "progress is possible now, don't block".
  bool prepare_wait(std::vector<pollfd>& fds);
  /// "waiting to receive message 3 from rank 2; to send message 4 to rank 0".
  [[nodiscard]] std::string pending() const;

 private:
  struct Inflight {
    std::uint32_t step = 0;
    transport::Request request;
    std::uint32_t fused_reduce = 0;  // a Reduce done by the transport with this receive, or kNoStep
  };
  // The sends (or receives) to one peer, in plan order.
  struct Lane {
    int peer = -1;
    bool is_send = false;
    std::vector<std::uint32_t> steps;
    std::size_t next = 0;            // next step to post
    std::vector<Inflight> inflight;  // at most `window` entries: a vector, no deque nodes
  };

  Result<bool> post_ready(Lane& lane);
  Result<Inflight> post(const Lane& lane, std::uint32_t step);
  void find_fusable_reduces();
  Result<bool> test_inflight(Lane& lane);
  Status run_local(std::uint32_t step);
  void complete(std::uint32_t step);
  std::uint8_t* address(const algo::Span& s) const;
  transport::MemRegion region(const algo::Span& s) const;

  const algo::Plan& plan_;
  PlanBuffers bufs_;
  core::OpDesc op_;
  int rank_;
  std::vector<transport::Connection*> conns_;
  std::size_t window_;
  LocalOps* local_;
  std::vector<std::uint32_t> remaining_;    // unmet dependencies per step
  std::vector<std::uint32_t> dep_offsets_;  // CSR: dependents of each step
  std::vector<std::uint32_t> dependents_;
  std::vector<Lane> lanes_;
  std::vector<std::uint32_t> local_ready_;
  std::vector<std::uint32_t> fusable_;  // per Recv step: the Reduce it can be fused with
  std::vector<bool> fused_;             // per Reduce step: done by the transport
  std::size_t done_ = 0;
};

}  // namespace loom::exec
