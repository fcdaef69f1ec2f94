#include "device/direct_path.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "config/config.hpp"
#include "executor/plan_run.hpp"

namespace loom::device {
namespace {

/// The plan's local steps as kernels on the transport's stream, and the fences that keep the
/// network (which reads and writes device memory itself) behind them.
class DeviceLocalOps final : public exec::LocalOps {
 public:
  DeviceLocalOps(Device& dev, Stream s) : dev_(dev), stream_(s) {}
  ~DeviceLocalOps() override {
    if (fence_) dev_.destroy_event(fence_);
  }
  DeviceLocalOps(const DeviceLocalOps&) = delete;
  DeviceLocalOps& operator=(const DeviceLocalOps&) = delete;

  Status copy(void* dst, const void* src, std::size_t bytes) override {
    return dev_.copy_async(dst, src, bytes, stream_);
  }
  Status reduce(DataType dtype, RedOp op, void* dst, const void* a, const void* b,
                std::size_t count) override {
    return dev_.reduce_async(dtype, op, dst, a, b, count, stream_);
  }
  [[nodiscard]] bool queues_on_stream() const override { return true; }
  Status record_fence() override {
    if (!fence_) {
      LOOM_ASSIGN_OR_RETURN(fence_, dev_.create_event());
    }
    return dev_.record(fence_, stream_);
  }
  Result<bool> fence_passed() override { return fence_ ? dev_.query(fence_) : true; }
  Status remote_write_landed() override { return dev_.flush_remote_writes(); }

 private:
  Device& dev_;
  Stream stream_;
  Event fence_ = nullptr;
};

class DirectTask final : public exec::Task {
 public:
  DirectTask(DirectPath& path, coll::OpDesc op, std::shared_ptr<const algo::Plan> plan, int nranks,
             std::size_t window, Deadline deadline, std::function<void()> on_done)
      : path_(path),
        ipc_(path.transport()),
        dev_(ipc_.device()),
        op_(std::move(op)),
        plan_(std::move(plan)),
        nranks_(nranks),
        window_(window),
        deadline_(deadline),
        on_done_(std::move(on_done)),
        local_(dev_, ipc_.stream()) {}
  ~DirectTask() override {
    if (done_event_) dev_.destroy_event(done_event_);
  }
  DirectTask(const DirectTask&) = delete;
  DirectTask& operator=(const DirectTask&) = delete;

  Status start(Deadline deadline) override {
    auto ctx = [&](const Status& st) { return st.with_context(describe()); };
    Status st = dev_.set_device(ipc_.device_ordinal());
    if (!st.is_ok()) return ctx(st);
    auto conns = path_.connect(plan_->peers(), nranks_, deadline);
    if (!conns.is_ok()) return ctx(conns.status());
    auto scratch = path_.scratch(plan_->scratch_bytes);
    if (!scratch.is_ok()) return ctx(scratch.status());
    auto ev = dev_.create_event();
    if (!ev.is_ok()) return ctx(ev.status());
    done_event_ = *ev;
    run_.emplace(*plan_, buffers(*scratch), op_, rank(), std::move(*conns), window_, &local_);
    return Status::ok();
  }

  Result<exec::Progress> progress() override {
    // Whichever thread drives this (the caller's, the engine's) launches kernels on the
    // communicator's device: CUDA refuses launches on a stream of another device.
    if (Status st = dev_.set_device(ipc_.device_ordinal()); !st.is_ok())
      return st.with_context(describe());
    if (!plan_done_) {
      auto r = run_->progress();
      if (!r.is_ok()) return r.status().with_context(describe());
      if (*r != exec::Progress::Done) return r;
      Status st = finalize();
      if (!st.is_ok()) return st.with_context(describe());
      plan_done_ = true;
    }
    // Every step is enqueued; done once the stream has run them.
    auto ready = dev_.query(done_event_);
    if (!ready.is_ok()) return ready.status().with_context(describe());
    if (!*ready) return exec::Progress::Idle;  // prepare_wait: nap until the stream is done
    if (on_done_) on_done_();
    return exec::Progress::Done;
  }
  bool prepare_wait(std::vector<pollfd>& fds) override {
    if (plan_done_) return true;  // only the stream is left: nothing to poll, the engine naps
    return run_ && run_->prepare_wait(fds);
  }
  [[nodiscard]] std::string describe() const override {
    return fmt::format("rank {}: {} [{}, device buffers over cuda_ipc{}]", rank(),
                       coll::describe(op_), plan_->algorithm,
                       path_.spans_hosts() ? " and the network" : "");
  }
  [[nodiscard]] std::string pending() const override {
    if (!run_) return "not started";
    return plan_done_ ? "waiting for the device stream to finish the collective's kernels"
                      : run_->pending();
  }
  [[nodiscard]] Deadline deadline() const override { return deadline_; }

 private:
  [[nodiscard]] int rank() const { return ipc_.rank(); }

  // Device buffers, whole, with their allocation ids when the network registers them.
  exec::PlanBuffers buffers(std::uint8_t* scratch) const {
    exec::PlanBuffers b;
    b.send = static_cast<std::uint8_t*>(const_cast<void*>(op_.send));
    b.recv = static_cast<std::uint8_t*>(op_.recv);
    b.scratch = scratch;
    b.send_bytes = op_.uses_send(rank()) ? op_.send_bytes(nranks_) : 0;
    b.recv_bytes = op_.uses_recv(rank()) ? op_.recv_bytes(nranks_) : 0;
    b.scratch_bytes = plan_->scratch_bytes;
    b.space = coll::MemoryKind::Device;
    b.device = ipc_.device_ordinal();
    if (path_.spans_hosts()) {
      if (b.send) b.send_id = dev_.allocation_id(b.send);
      if (b.recv) b.recv_id = dev_.allocation_id(b.recv);
      if (b.scratch) b.scratch_id = dev_.allocation_id(b.scratch);
    }
    return b;
  }

  // Avg is a sum until here; every rank that holds a result divides its own copy on the device.
  Status finalize() {
    Stream s = ipc_.stream();
    if (op_.divides_for_avg(rank()))
      LOOM_RETURN_IF_ERROR(dev_.divide_async(op_.dtype, op_.recv, op_.count, nranks_, s));
    return dev_.record(done_event_, s);
  }

  DirectPath& path_;
  transport::DeviceTransport& ipc_;
  Device& dev_;
  coll::OpDesc op_;
  std::shared_ptr<const algo::Plan> plan_;
  int nranks_;
  std::size_t window_;
  Deadline deadline_;
  std::function<void()> on_done_;
  DeviceLocalOps local_;
  std::optional<exec::PlanRun> run_;
  Event done_event_ = nullptr;
  bool plan_done_ = false;
};

}  // namespace

Result<std::unique_ptr<DirectPath>> DirectPath::create(const transport::CreateContext& ctx,
                                                       transport::ConnectionSet* network,
                                                       const transport::Registry& registry) {
  std::unique_ptr<DirectPath> none;
  if (!ctx.device || ctx.host_ids.empty()) return none;
  const std::string& mine = ctx.host_ids[static_cast<std::size_t>(ctx.rank)];
  std::vector<bool> local;
  bool one_host = true;
  for (const auto& h : ctx.host_ids) {
    local.push_back(h == mine);
    one_host = one_host && h == mine;
  }
  if (!one_host && !network) return none;  // across hosts: staged through the host transports
  auto t = registry.create(transport::TransportKind::CudaIpc, ctx);
  if (!t.is_ok())
    return t.status().with_context(
        fmt::format("rank {}: setting up the cuda_ipc transport", ctx.rank));
  if (!*t) return none;
  std::unique_ptr<transport::DeviceTransport> device(
      dynamic_cast<transport::DeviceTransport*>(t->get()));
  if (!device)
    return make_error(ErrorCode::Internal, "rank {}: the {} transport carries no device buffers",
                      ctx.rank, (*t)->name());
  (void)t->release();
  std::unique_ptr<PeerReadRoute> route;
  if (transport::PeerBoard* board = device->peer_board()) {
    const auto limit = static_cast<std::size_t>(
        ctx.config != nullptr ? ctx.config->get_int("LOOM_CUDA_IPC_PEER_CACHE") : 64);
    auto made = PeerReadRoute::create(*device, *board, ctx.nranks, limit);
    if (!made.is_ok())
      return made.status().with_context(fmt::format("rank {}: the peer-read route", ctx.rank));
    route = std::move(*made);
  }
  return std::make_unique<DirectPath>(std::move(device), one_host ? nullptr : network,
                                      std::move(local), std::move(route));
}

Result<std::unique_ptr<exec::Task>> DirectPath::read_in_place(
    const coll::OpDesc& op, Stream stream, std::shared_ptr<const algo::Plan> plan, int nranks,
    std::size_t window, Deadline deadline, std::function<void()> on_done) {
  // The fallback's scratch now, before the stream waits for the call (as submit_on_stream does).
  LOOM_RETURN_IF_ERROR(reserve_scratch(plan->scratch_bytes)
                           .with_context(fmt::format("rank {}: {}: device scratch",
                                                     transport_->rank(), coll::describe(op))));
  auto fallback = [this, op, plan = std::move(plan), nranks, window, deadline] {
    return task(op, plan, nranks, window, deadline, nullptr);
  };
  return route_->submit(op, stream, deadline, std::move(fallback), std::move(on_done));
}

Result<std::vector<transport::Connection*>> DirectPath::connect(const std::vector<int>& peers,
                                                                int nranks, Deadline deadline) {
  std::vector<int> here, there;
  for (int p : peers) (local_[static_cast<std::size_t>(p)] ? here : there).push_back(p);
  LOOM_RETURN_IF_ERROR(transport_->ensure(here, deadline));
  if (!there.empty()) LOOM_RETURN_IF_ERROR(network_->ensure(there, deadline));
  std::vector<transport::Connection*> conns(static_cast<std::size_t>(nranks), nullptr);
  for (int p : here) conns[static_cast<std::size_t>(p)] = transport_->get(p);
  for (int p : there) conns[static_cast<std::size_t>(p)] = network_->get(p);
  return conns;
}

DirectPath::~DirectPath() {
  route_.reset();  // its calls leave the stream first
  if (!scratch_) return;
  // A failed collective may have left work on the stream that still uses the scratch.
  Device& dev = transport_->device();
  if (!dev.synchronize(transport_->stream(), Deadline::after(std::chrono::seconds(10))).is_ok())
    return;
  for (void* p : outgrown_) dev.free(p);
  dev.free(scratch_);
}

Status DirectPath::reserve_scratch(std::size_t bytes) {
  return scratch(bytes).status();
}

Result<std::uint8_t*> DirectPath::scratch(std::size_t bytes) {
  std::lock_guard lk(scratch_mu_);
  if (bytes > scratch_bytes_) {
    std::size_t grown = std::max<std::size_t>(scratch_bytes_, 4096);
    while (grown < bytes) grown *= 2;
    LOOM_ASSIGN_OR_RETURN(void* p, transport_->device().alloc(grown));
    if (scratch_) outgrown_.push_back(scratch_);
    scratch_ = p;
    scratch_bytes_ = grown;
  }
  return static_cast<std::uint8_t*>(scratch_);
}

std::unique_ptr<exec::Task> DirectPath::task(const coll::OpDesc& op,
                                             std::shared_ptr<const algo::Plan> plan, int nranks,
                                             std::size_t window, Deadline deadline,
                                             std::function<void()> on_done) {
  return std::make_unique<DirectTask>(*this, op, std::move(plan), nranks, window, deadline,
                                      std::move(on_done));
}

}  // namespace loom::device
