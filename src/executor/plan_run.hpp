// Executes one Plan over Connections and the host reduction kernels, without blocking.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "algorithms/plan.hpp"
#include "algorithms/plan_index.hpp"
#include "collective/op.hpp"
#include "executor/task.hpp"
#include "transports/connection.hpp"

namespace loom::exec {

/// The collective's three buffers. Sizes are the whole buffers' (0: unknown; a request's
/// region is then only its span); transports register device memory a whole buffer at a time.
struct PlanBuffers {
  std::uint8_t* send = nullptr;
  std::uint8_t* recv = nullptr;
  std::uint8_t* scratch = nullptr;
  std::size_t send_bytes = 0;
  std::size_t recv_bytes = 0;
  std::size_t scratch_bytes = 0;
  coll::MemoryKind space = coll::MemoryKind::Host;
  int device = -1;            // Device: the ordinal
  std::uint64_t send_id = 0;  // Device: allocation ids (see transport::MemRegion)
  std::uint64_t recv_id = 0;
  std::uint64_t scratch_id = 0;
  /// More buffers, for plans over several callers' buffers (a group of sends and receives):
  /// algo::BufId value kFirstExtraBuf + i names extra[i]. Host memory.
  struct Extra {
    std::uint8_t* ptr = nullptr;
    std::size_t bytes = 0;
  };
  std::vector<Extra> extra;
};

/// The first algo::BufId value that names a PlanBuffers::extra buffer.
inline constexpr std::uint8_t kFirstExtraBuf = 3;
/// The BufId of PlanBuffers::extra[i].
inline algo::BufId extra_buf(std::size_t i) {
  return static_cast<algo::BufId>(kFirstExtraBuf + i);
}
/// How many extra buffers a plan may name.
inline constexpr std::size_t kMaxExtraBufs = 255 - kFirstExtraBuf;

/// Where the local steps (Copy, Reduce) run. By default on the host, synchronously; device
/// buffers give an implementation that enqueues them on the device stream the transport also
/// uses, so that the stream's order is the plan's order.
class LocalOps {
 public:
  virtual ~LocalOps() = default;
  virtual Status copy(void* dst, const void* src, std::size_t bytes) = 0;
  virtual Status reduce(DataType dtype, RedOp op, void* dst, const void* a, const void* b,
                        std::size_t count) = 0;
  /// True when copy() and reduce() only queue work on a device stream: a step counts as done
  /// once queued, which is right for connections ordered on that stream and wrong for one that
  /// touches memory itself (a NIC): those wait for a fence the stream has passed.
  [[nodiscard]] virtual bool queues_on_stream() const { return false; }
  /// Marks everything queued on the stream so far.
  virtual Status record_fence() { return Status::ok(); }
  /// Non-blocking: whether the stream has run everything before the last record_fence().
  virtual Result<bool> fence_passed() { return true; }
  /// A connection without stream order has written device memory that work queued next will
  /// read (GPUDirect RDMA writes are flushed here).
  virtual Status remote_write_landed() { return Status::ok(); }
};

class PlanRun {
 public:
  /// `conns[peer]` must be non-null for every peer the plan talks to. `window` bounds the
  /// requests in flight per (peer, direction). `local` null: local steps run on the host.
  PlanRun(const algo::Plan& plan, PlanBuffers bufs, const coll::OpDesc& op, int rank,
          std::vector<transport::Connection*> conns, std::size_t window, LocalOps* local = nullptr);
  /// Empty, to be reset() before use: a run kept between calls allocates nothing once its
  /// vectors have grown to the plans it runs (small calls are bound by such costs).
  PlanRun() = default;
  /// Starts `plan` afresh on connections() (fill them first), as the constructor does.
  void reset(const algo::Plan& plan, PlanBuffers bufs, const coll::OpDesc& op, int rank,
             std::size_t window, LocalOps* local = nullptr);
  /// The connection to each peer (indexed by rank; null: not talked to), for reset().
  std::vector<transport::Connection*>& connections() { return conns_; }

  Result<Progress> progress();
  /// See Connection::prepare_wait; false means "progress is possible now, don't block".
  bool prepare_wait(std::vector<pollfd>& fds);
  /// "waiting to receive message 3 from rank 2; to send message 4 to rank 0".
  [[nodiscard]] std::string pending() const;
  /// Tags per step (indexed like the plan's steps) instead of the op's own: each message of a
  /// group of sends and receives carries its own call's tag. Call before progress().
  void set_step_tags(std::vector<coll::Tag> tags) { step_tags_ = std::move(tags); }

 private:
  struct Inflight {
    std::uint32_t step = 0;
    transport::Request request;
    std::uint32_t fused_reduce = 0;  // a Reduce done by the transport with this receive, or kNoStep
  };
  // The sends (or receives) to one peer, in plan order (the index's lane), and how far they
  // got. Its requests in flight, oldest first, are inflight_[first, first + count): each lane
  // has `window` slots there, so a run allocates them at once.
  struct Lane {
    const algo::PlanIndex::Lane* def = nullptr;
    std::size_t next = 0;  // next step to post
    std::size_t first = 0;
    std::size_t count = 0;
    bool fenced = false;  // its connection is not ordered on the local steps' stream
    [[nodiscard]] int peer() const { return def->peer; }
    [[nodiscard]] bool is_send() const { return def->is_send; }
    [[nodiscard]] std::size_t steps() const { return def->steps.size(); }
  };

  Result<bool> post_ready(Lane& lane);
  /// For a fenced lane: whether step `s` may be posted (its stream-queued dependencies have
  /// run), recording a fence when one is needed.
  Result<bool> fence_allows(std::uint32_t s);
  Result<bool> poll_fence();
  /// The sum of the busy lanes' connections' moved() counts.
  [[nodiscard]] std::uint64_t pieces_moved() const;
  Result<Inflight> post(const Lane& lane, std::uint32_t step);
  Result<bool> test_inflight(Lane& lane);
  Status run_local(std::uint32_t step);
  /// `queued_only`: the step's work is only queued on the device stream (see settle_gen_).
  void complete(std::uint32_t step, bool queued_only);
  std::uint8_t* address(const algo::Span& s) const;
  /// The buffer `s` lies in, and the offset of `s` in it.
  std::pair<transport::MemRegion, std::size_t> region(const algo::Span& s) const;

  const algo::Plan* plan_ = nullptr;
  std::shared_ptr<const algo::PlanIndex> own_index_;  // when the plan has none
  const algo::PlanIndex* index_ = nullptr;
  PlanBuffers bufs_;
  coll::OpDesc op_;
  int rank_ = 0;
  std::vector<transport::Connection*> conns_;
  std::size_t window_ = 1;
  LocalOps* local_ = nullptr;
  bool stream_local_ = false;             // local_->queues_on_stream()
  std::vector<std::uint32_t> remaining_;  // unmet dependencies per step
  std::vector<Lane> lanes_;
  std::vector<Inflight> inflight_;  // the lanes' slots
  std::vector<std::uint32_t> local_ready_;
  std::vector<bool> fused_;  // per Reduce step: done by the transport (when the plan has any)
  std::size_t done_ = 0;
  // Fences (LocalOps::queues_on_stream): a step that completed when its work was queued needs
  // fence number settle_gen_[step] to have passed before a fenced lane may use what it wrote
  // or read (0: nothing to wait for; empty without such local steps). One fence is in flight
  // at a time.
  std::vector<std::uint32_t> settle_gen_;
  std::uint32_t fences_recorded_ = 0;
  std::uint32_t fences_passed_ = 0;
  std::uint64_t moved_ = 0;  // pieces_moved() at the last progress() that made no other progress
  std::vector<coll::Tag> step_tags_;  // empty: the op's tags
};

}  // namespace loom::exec
