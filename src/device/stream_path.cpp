#include "device/stream_path.hpp"

#include <fmt/format.h>

#include <atomic>
#include <optional>
#include <thread>

#include "log/log.hpp"

namespace loom::device {

Result<bool> needs_stream_path(Device* dev, const coll::OpDesc& op, int rank, int nranks,
                               void* stream) {
  auto fail = [&](const std::string& why) {
    return Status(ErrorCode::InvalidArgument,
                  fmt::format("rank {}: {}: {}", rank, coll::describe(op), why));
  };
  if (!dev) {
    if (stream == nullptr) return false;
    return fail(
        "a CUDA stream was given but no device runtime is active (LOOM_DEVICE; loom built "
        "without CUDA, or no GPU visible)");
  }
  const bool needs_send =
      op.count > 0 && !(op.kind == coll::CollKind::Broadcast && rank != op.root);
  const bool needs_recv = op.count > 0 && !(op.kind == coll::CollKind::Reduce && rank != op.root);
  std::optional<MemoryKind> send_kind, recv_kind;
  if (needs_send && op.send) {
    LOOM_ASSIGN_OR_RETURN(send_kind, dev->pointer_kind(op.send));
  }
  if (needs_recv && op.recv) {
    LOOM_ASSIGN_OR_RETURN(recv_kind, dev->pointer_kind(op.recv));
  }
  if (send_kind && recv_kind && *send_kind != *recv_kind)
    return fail(fmt::format(
        "send buffer {} is {} memory but receive buffer {} is {} memory; pass both on the "
        "device (with a stream) or both on the host",
        op.send, to_string(*send_kind), op.recv, to_string(*recv_kind)));
  (void)nranks;
  if (stream != nullptr) {
    LOOM_ASSIGN_OR_RETURN(bool capturing, dev->is_capturing(stream));
    if (capturing)
      return Status(
          ErrorCode::InvalidUsage,
          fmt::format("rank {}: {}: stream {} is being captured into a CUDA graph; loom's "
                      "collectives progress on the host and cannot be captured (call it "
                      "outside the captured region)",
                      rank, coll::describe(op), stream));
  }
  return stream != nullptr || send_kind == MemoryKind::Device || recv_kind == MemoryKind::Device;
}

// ---- Gate ----

void Gate::open() {
  {
    std::lock_guard lk(mu_);
    if (open_) return;
    open_ = true;
  }
  cv_.notify_all();
  if (line_) line_->open(ticket_);
}

// ---- GateLine ----

Result<std::shared_ptr<GateLine>> GateLine::create(Device& dev, Deadline deadline) {
  LOOM_ASSIGN_OR_RETURN(void* p, dev.alloc_pinned(sizeof(std::uint32_t)));
  auto* word = static_cast<std::uint32_t*>(p);
  std::atomic_ref<std::uint32_t>(*word).store(0, std::memory_order_release);
  auto line = std::make_shared<GateLine>(dev, word);
  // One wait that holds nothing (the word is already there), so that a runtime or device
  // without stream memory operations fails here, at creation, rather than at the first call.
  LOOM_ASSIGN_OR_RETURN(Stream s, dev.create_stream());
  Status st = dev.wait_value(s, word, 0);
  if (st.is_ok()) st = dev.synchronize(s, deadline);
  dev.destroy_stream(s);
  if (!st.is_ok())
    return st.with_context(
        "LOOM_STREAM_GATE=wait-value (use host-function where the device "
        "has no stream memory operations)");
  return line;
}

GateLine::~GateLine() {
  dev_.free_pinned(word_);
}

std::uint64_t GateLine::take() {
  std::lock_guard lk(mu_);
  return next_++;
}

void GateLine::open(std::uint64_t t) {
  std::lock_guard lk(mu_);
  if (t <= done_) return;
  early_.insert(t);
  while (!early_.empty() && *early_.begin() == done_ + 1) {
    early_.erase(early_.begin());
    ++done_;
  }
  std::atomic_ref<std::uint32_t>(*word_).store(static_cast<std::uint32_t>(done_),
                                               std::memory_order_release);
}

bool Gate::wait() {
  std::unique_lock lk(mu_);
  return cv_.wait_until(lk, deadline_.at(), [&] { return open_; });
}

namespace {

// The host function on the stream: holds the stream until the collective has finished.
void gate_fn(void* arg) {
  std::unique_ptr<std::shared_ptr<Gate>> holder(static_cast<std::shared_ptr<Gate>*>(arg));
  if (!(*holder)->wait())
    LOOM_LOG_ERROR(Cuda, "stream gate released at its deadline before the collective finished");
}

// Starts the collective once the stream has produced its inputs; opens the gate when it ends.
class StagedTask final : public exec::Task {
 public:
  StagedTask(std::unique_ptr<exec::Task> inner, Device& dev, Event ready,
             std::shared_ptr<Gate> gate)
      : inner_(std::move(inner)), dev_(dev), ready_(ready), gate_(std::move(gate)) {}
  ~StagedTask() override {
    gate_->open();  // never leave the stream blocked, whatever happened to the collective
    dev_.destroy_event(ready_);
  }
  StagedTask(const StagedTask&) = delete;
  StagedTask& operator=(const StagedTask&) = delete;

  Status start(Deadline deadline) override {
    start_deadline_ = deadline;
    return Status::ok();
  }
  Result<exec::Progress> progress() override {
    if (!inner_started_) {
      auto ready = dev_.query(ready_);
      if (!ready.is_ok()) return ready.status().with_context(inner_->describe());
      if (!*ready) return exec::Progress::Idle;  // the stream has not reached the collective yet
      Status st = inner_->start(start_deadline_);
      if (!st.is_ok()) return st;
      inner_started_ = true;
    }
    auto r = inner_->progress();
    if (!r.is_ok() || *r == exec::Progress::Done) gate_->open();
    return r;
  }
  bool prepare_wait(std::vector<pollfd>& fds) override {
    // Before the stream reaches the collective there is no descriptor to block on: the engine
    // naps (true, no fds) rather than spin against the stream for the CPU.
    return !inner_started_ || inner_->prepare_wait(fds);
  }
  [[nodiscard]] std::string describe() const override { return inner_->describe(); }
  [[nodiscard]] std::string pending() const override {
    return inner_started_ ? inner_->pending()
                          : "waiting for the stream to reach the collective (device inputs "
                            "not copied to staging yet)";
  }
  [[nodiscard]] Deadline deadline() const override { return inner_->deadline(); }

 private:
  std::unique_ptr<exec::Task> inner_;
  Device& dev_;
  Event ready_;
  std::shared_ptr<Gate> gate_;
  Deadline start_deadline_ = Deadline::never();
  bool inner_started_ = false;
};

constexpr std::size_t kAlign = 256;
std::size_t align_up(std::size_t n) {
  return (n + kAlign - 1) & ~(kAlign - 1);
}

}  // namespace

// ---- StagingPool ----

StagingPool::~StagingPool() {
  try {
    drain();
  } catch (...) {  // a destructor must not throw (logging might)
  }
}

void StagingPool::drain() {
  const Deadline deadline = Deadline::after(drain_timeout_);
  const auto start = Clock::now();
  for (auto& b : buffers_) {
    bool done = false;
    while (!done) {
      auto q = dev_.query(b->released);
      done = !q.is_ok() || *q;
      if (!done && deadline.expired()) break;
      if (!done) std::this_thread::sleep_for(backoff_nap(Clock::now() - start));
    }
    if (!done) {
      LOOM_LOG_ERROR(Cuda,
                     "staging buffer of {} bytes still in use by a stream at teardown; "
                     "leaking it",
                     b->bytes);
      continue;
    }
    dev_.free_pinned(b->ptr);
    dev_.destroy_event(b->released);
  }
  for (void* p : outgrown_) dev_.free_pinned(p);  // idle since they were outgrown
  outgrown_.clear();
}

Result<StagingPool::Buffer*> StagingPool::acquire(std::size_t bytes, Deadline deadline) {
  bytes = std::max<std::size_t>(align_up(bytes), std::size_t{64} * 1024);
  const auto start = Clock::now();
  for (;;) {
    Buffer* small = nullptr;
    for (auto& b : buffers_) {
      if (b->busy) continue;
      LOOM_ASSIGN_OR_RETURN(bool idle, dev_.query(b->released));
      if (!idle) continue;
      if (b->bytes >= bytes) {
        b->busy = true;
        return b.get();
      }
      small = b.get();
    }
    if (small) {  // idle but too small: grow it (freed only at drain(): see outgrown_)
      std::size_t grown = std::max(small->bytes, std::size_t{64} * 1024);
      while (grown < bytes) grown *= 2;
      LOOM_ASSIGN_OR_RETURN(void* p, dev_.alloc_pinned(grown));
      outgrown_.push_back(small->ptr);
      small->ptr = p;
      small->bytes = grown;
      small->busy = true;
      return small;
    }
    if (buffers_.size() < kMaxBuffers) break;
    // Every buffer is still in flight on a stream: wait for the oldest calls to drain (like a
    // full NCCL work FIFO), bounded by the call's deadline.
    if (deadline.expired())
      return make_error(ErrorCode::Timeout,
                        "all {} staging buffers still in use by earlier stream-ordered calls at "
                        "this call's deadline (is the stream blocked?)",
                        kMaxBuffers);
    std::this_thread::sleep_for(backoff_nap(Clock::now() - start));
  }
  auto b = std::make_unique<Buffer>();
  LOOM_ASSIGN_OR_RETURN(b->released, dev_.create_event());
  auto p = dev_.alloc_pinned(bytes);
  if (!p.is_ok()) {
    dev_.destroy_event(b->released);
    return p.status();
  }
  b->ptr = *p;
  b->bytes = bytes;
  b->busy = true;
  buffers_.push_back(std::move(b));
  return buffers_.back().get();
}

Status StagingPool::release(Buffer* b, Stream s) {
  b->busy = false;
  return dev_.record(b->released, s);
}

// ---- StreamPath ----

Result<StagedCall> StreamPath::stage(const coll::OpDesc& op, int rank, int nranks, Stream stream,
                                     Deadline deadline) {
  StagedCall call;
  call.host_op = op;
  // Only what this rank reads and writes: a non-root's buffer of a rooted call may be any size.
  const std::size_t send_bytes = op.send && op.uses_send(rank) ? op.send_bytes(nranks) : 0;
  const std::size_t recv_bytes = op.recv && op.uses_recv(rank) ? op.recv_bytes(nranks) : 0;
  const bool in_place = op.send && op.recv && op.in_place(rank);
  // In place, send and receive are one region (the larger one) and stay one in staging.
  const std::size_t total =
      in_place ? std::max(send_bytes, recv_bytes) : align_up(send_bytes) + recv_bytes;
  LOOM_ASSIGN_OR_RETURN(call.staging, pool_.acquire(total, deadline));
  auto* base = static_cast<std::uint8_t*>(call.staging->ptr);
  if (in_place) {
    // The region starts at the larger buffer: send for reduce_scatter and scatter.
    const bool send_larger =
        op.kind == coll::CollKind::ReduceScatter || op.kind == coll::CollKind::Scatter;
    const auto* region = static_cast<const std::uint8_t*>(send_larger ? op.send : op.recv);
    call.host_op.send = base + (static_cast<const std::uint8_t*>(op.send) - region);
    call.host_op.recv = base + (static_cast<const std::uint8_t*>(op.recv) - region);
  } else {
    call.host_op.send = op.send && op.uses_send(rank) ? base : nullptr;
    call.host_op.recv = op.recv && op.uses_recv(rank) ? base + align_up(send_bytes) : nullptr;
  }
  call.device_recv = recv_bytes > 0 ? op.recv : nullptr;
  call.recv_bytes = recv_bytes;
  call.gate = make_gate(deadline);
  Status st = Status::ok();
  if (send_bytes)
    st = dev_.copy_async(const_cast<void*>(call.host_op.send), op.send, send_bytes, stream);
  if (st.is_ok()) {
    auto ev = dev_.create_event();
    if (ev.is_ok()) {
      call.inputs_ready = *ev;
      st = dev_.record(call.inputs_ready, stream);
    } else {
      st = ev.status();
    }
  }
  if (!st.is_ok()) {
    if (call.inputs_ready) dev_.destroy_event(call.inputs_ready);
    (void)pool_.release(call.staging, stream);
    return st.with_context(
        fmt::format("rank {}: {}: staging device inputs", rank, coll::describe(op)));
  }
  return call;
}

Result<StagedGroup> StreamPath::stage_group(const std::vector<coll::OpDesc>& ops, int rank,
                                            int nranks, Stream stream, Deadline deadline) {
  StagedGroup g;
  std::vector<std::size_t> at;
  std::size_t total = 0;
  for (const coll::OpDesc& op : ops) {
    at.push_back(total);
    total += align_up(op.uses_send(rank) ? op.send_bytes(nranks) : 0) +
             align_up(op.uses_recv(rank) ? op.recv_bytes(nranks) : 0);
  }
  LOOM_ASSIGN_OR_RETURN(g.shared.staging, pool_.acquire(std::max<std::size_t>(total, 1), deadline));
  auto* base = static_cast<std::uint8_t*>(g.shared.staging->ptr);
  Status st = Status::ok();
  for (std::size_t i = 0; i < ops.size() && st.is_ok(); ++i) {
    const coll::OpDesc& op = ops[i];
    const std::size_t send_bytes = op.uses_send(rank) ? op.send_bytes(nranks) : 0;
    const std::size_t recv_bytes = op.uses_recv(rank) ? op.recv_bytes(nranks) : 0;
    coll::OpDesc host = op;
    host.send = send_bytes ? base + at[i] : nullptr;
    host.recv = recv_bytes ? base + at[i] + align_up(send_bytes) : nullptr;
    if (send_bytes) st = dev_.copy_async(const_cast<void*>(host.send), op.send, send_bytes, stream);
    if (recv_bytes) g.results.push_back({op.recv, host.recv, recv_bytes});
    g.host_ops.push_back(host);
  }
  if (st.is_ok()) {
    auto ev = dev_.create_event();
    st = ev.status();
    if (ev.is_ok()) {
      g.shared.inputs_ready = *ev;
      st = dev_.record(g.shared.inputs_ready, stream);
    }
  }
  if (!st.is_ok()) {
    if (g.shared.inputs_ready) dev_.destroy_event(g.shared.inputs_ready);
    (void)pool_.release(g.shared.staging, stream);
    return st.with_context(
        fmt::format("rank {}: a group of {} sends and receives: staging device "
                    "inputs",
                    rank, ops.size()));
  }
  g.shared.gate = make_gate(deadline);
  return g;
}

Result<StagedCall> StreamPath::direct(const coll::OpDesc& op, int rank, Stream stream,
                                      Deadline deadline) {
  StagedCall call;
  call.host_op = op;
  call.gate = make_gate(deadline);
  auto ev = dev_.create_event();
  Status st = ev.status();
  if (ev.is_ok()) {
    call.inputs_ready = *ev;
    st = dev_.record(call.inputs_ready, stream);
    if (!st.is_ok()) dev_.destroy_event(call.inputs_ready);
  }
  if (!st.is_ok())
    return st.with_context(
        fmt::format("rank {}: {}: ordering on the stream", rank, coll::describe(op)));
  return call;
}

std::unique_ptr<exec::Task> StreamPath::wrap(std::unique_ptr<exec::Task> inner,
                                             const StagedCall& call) {
  return std::make_unique<StagedTask>(std::move(inner), dev_, call.inputs_ready, call.gate);
}

std::shared_ptr<Gate> StreamPath::make_gate(Deadline deadline) const {
  return line_ ? std::make_shared<Gate>(deadline, line_) : std::make_shared<Gate>(deadline);
}

Status StreamPath::enqueue_gate(const std::shared_ptr<Gate>& gate, Stream stream) {
  if (const GateLine* line = gate->line())
    return dev_.wait_value(stream, line->word(), gate->value());
  auto* holder = new std::shared_ptr<Gate>(gate);
  Status st = dev_.launch_host_fn(stream, &gate_fn, holder);
  if (!st.is_ok()) delete holder;
  return st;
}

Status StreamPath::finish(const StagedCall& call, int rank, Stream stream) {
  Status st = enqueue_gate(call.gate, stream);
  if (st.is_ok() && call.recv_bytes)
    st = dev_.copy_async(call.device_recv, call.host_op.recv, call.recv_bytes, stream);
  if (st.is_ok() && call.staging) st = pool_.release(call.staging, stream);
  if (st.is_ok()) return st;
  return st.with_context(fmt::format("rank {}: {}: ordering the call on stream {}", rank,
                                     coll::describe(call.host_op), stream));
}

Status StreamPath::finish_group(const StagedGroup& group, int rank, Stream stream) {
  Status st = enqueue_gate(group.shared.gate, stream);
  for (std::size_t i = 0; st.is_ok() && i < group.results.size(); ++i) {
    const StagedGroup::ResultCopy& r = group.results[i];
    st = dev_.copy_async(r.device, r.host, r.bytes, stream);
  }
  if (st.is_ok()) st = pool_.release(group.shared.staging, stream);
  if (st.is_ok()) return st;
  return st.with_context(
      fmt::format("rank {}: a group of {} sends and receives: ordering it on "
                  "stream {}",
                  rank, group.host_ops.size(), stream));
}

}  // namespace loom::device
