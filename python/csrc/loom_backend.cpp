#include "loom_backend.hpp"

#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <array>
#include <loom/unique_id.hpp>
#include <utility>

#include "pieces.hpp"
#include "tensor_args.hpp"
#include "torch_compat.hpp"

namespace loom_torch {
namespace {

constexpr const char* kInitCountKey = "loom/init_count";

// Every rank of a (re)initialisation adds 1 to a counter in the group's store; all adds of one
// initialisation precede any of the next (which needs this one's communicator), so the counter
// names the generation and a re-created group never reads a stale id.
std::string id_key(c10d::Store& store, int size) {
  const int64_t n = store.add(kInitCountKey, 1);
  return "loom/unique_id/" + std::to_string((n - 1) / size);
}

loom::UniqueId exchange_id(c10d::Store& store, int rank, int size) {
  const std::string key = id_key(store, size);
  if (rank == 0) {
    const loom::UniqueId id = loom::UniqueId::create();
    const auto bytes = id.to_bytes();
    store.set(key, std::vector<uint8_t>(bytes.begin(), bytes.end()));
    return id;
  }
  const std::vector<uint8_t> bytes = store.get(key);  // waits up to the store's timeout
  TORCH_CHECK(bytes.size() == loom::UniqueId::kBytes, "loom: the id under '", key,
              "' in the store has ", bytes.size(), " bytes, expected ", loom::UniqueId::kBytes);
  std::array<uint8_t, loom::UniqueId::kBytes> raw{};
  std::copy(bytes.begin(), bytes.end(), raw.begin());
  return loom::UniqueId::from_bytes(raw);
}

[[noreturn]] void rethrow_loom(const char* what, const loom::Error& e) {
  std::rethrow_exception(make_backend_error(std::string("loom ") + what + " failed (" +
                                            std::string(loom::to_string(e.code())) +
                                            "): " + e.what()));
}

}  // namespace

ProcessGroupLoom::ProcessGroupLoom(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                   BackendConfig config)
    : c10d::Backend(rank, size),
      config_(std::move(config)),
      store_(store),
      watcher_(std::make_shared<CompletionWatcher>()) {
  loom::CommOptions options;
  options.timeout = config_.timeout;
  options.settings = config_.settings;
  options.deterministic = config_.deterministic;
  c10::OptionalDeviceGuard device;  // loom's device-side state lives on the current device
  if (config_.cuda_device >= 0) device.reset_device(c10::Device(c10::kCUDA, config_.cuda_device));
  try {
    const loom::UniqueId id = exchange_id(*store, rank, size);
    comm_ = std::make_shared<loom::Communicator>(id, rank, size, options);
  } catch (const loom::Error& e) {
    rethrow_loom(("initialisation of group '" + config_.group_name + "'").c_str(), e);
  }
}

ProcessGroupLoom::~ProcessGroupLoom() {
  try {
    shutdown();
  } catch (...) {  // a destructor must not throw; shutdown's errors were the ops' errors
  }
}

c10::intrusive_ptr<c10d::Backend::Options> ProcessGroupLoom::getBackendOptions() {
  auto opts = c10::make_intrusive<Options>("loom", config_.timeout);
  opts->group_name = config_.group_name;
  return opts;
}

void ProcessGroupLoom::setTimeout(std::chrono::milliseconds timeout) {
  std::lock_guard lk(mu_);
  call_timeout_ = timeout;
}

void ProcessGroupLoom::abort() {
  std::lock_guard lk(mu_);    // held briefly by issuing threads: loom calls return at once
  if (comm_) comm_->abort();  // pending works fail with Aborted within loom's 1 s bound
}

void ProcessGroupLoom::drain() {
  std::deque<c10::intrusive_ptr<LoomWork>> pending;
  {
    std::lock_guard lk(mu_);
    pending.swap(inflight_);
  }
  for (auto& w : pending) w->drive();
}

void ProcessGroupLoom::shutdown() {
  drain();
  if (watcher_) watcher_->stop();
  std::lock_guard lk(mu_);
  comm_.reset();
}

std::string ProcessGroupLoom::loom_status() const {
  std::lock_guard lk(mu_);
  return comm_ ? comm_->status() : std::string("loom: the process group was shut down");
}

std::string ProcessGroupLoom::flight_record() const {
  std::lock_guard lk(mu_);
  if (!comm_) throw std::runtime_error("loom: the process group was shut down");
  return comm_->flight_record();
}

std::vector<int> ProcessGroupLoom::failed_ranks() const {
  std::lock_guard lk(mu_);
  return comm_ ? comm_->failed_ranks() : std::vector<int>{};
}

loom::CollOptions ProcessGroupLoom::call_options(std::chrono::milliseconds timeout) const {
  loom::CollOptions co;
  if (timeout != c10d::kUnsetTimeout) {
    co.timeout = timeout;
  } else if (call_timeout_) {
    co.timeout = call_timeout_;
  }
  return co;
}

namespace {

std::optional<c10::Device> device_of(const IssuedOp& op) {
  for (const auto* list : {&op.outputs, &op.keep_alive})
    for (const auto& t : *list)
      if (t.defined()) return t.device();
  return std::nullopt;
}

}  // namespace

void ProcessGroupLoom::order_on_stream(IssuedOp& op, loom::CollOptions& co) const {
  const std::optional<c10::Device> device = device_of(op);
  if (!device || device->is_cpu()) return;
  const bool mine = device->is_cuda() && device->index() == config_.cuda_device;
  if (!mine) {
    const std::string serves = config_.cuda_device >= 0
                                   ? "cuda:" + std::to_string(config_.cuda_device) + " and CPU"
                                   : std::string("only CPU");
    TORCH_CHECK_VALUE(false, "loom ", op.name, ": got a tensor on ", *device, "; group '",
                      config_.group_name, "' serves ", serves,
                      " tensors (its communicator lives on the CUDA device current at "
                      "init_process_group/new_group: call torch.cuda.set_device first)");
  }
  c10::impl::VirtualGuardImpl impl(device->type());
  op.stream = impl.getStream(*device);
  for (const auto* list : {&op.outputs, &op.keep_alive})
    for (const auto& t : *list)
      if (t.defined() && t.device() == *device) t.record_stream(*op.stream);
  co.stream = op.stream->native_handle();
}

void ProcessGroupLoom::reap_locked() {
  while (!inflight_.empty() && inflight_.front()->poll()) inflight_.pop_front();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::launch(IssuedOp op,
                                                        std::chrono::milliseconds timeout,
                                                        const Issue& issue) {
  std::lock_guard lk(mu_);
  TORCH_CHECK(comm_, "loom ", op.name, ": the process group was shut down");
  // Inside startCoalescing/endCoalescing (a loom group) the works cannot be tested yet.
  if (!coalescing_) reap_locked();
  op.rank = rank_;
  op.failure_context = [weak = std::weak_ptr<loom::Communicator>(comm_)]() -> std::string {
    auto comm = weak.lock();
    return comm ? comm->status() : std::string();
  };
  loom::CollOptions co = call_options(timeout);
  order_on_stream(op, co);
  c10::OptionalDeviceGuard device;
  if (op.stream) device.reset_device(op.stream->device());
  std::optional<loom::Error> failed;
  try {
    issue(*comm_, co, op.works);
  } catch (const loom::Error& e) {
    failed = e;
  }
  ++seq_;
  const std::string name = op.name;
  std::vector<loom::Work> issued = op.works;
  const bool ordered = op.stream.has_value();
  auto work = c10::make_intrusive<LoomWork>(std::move(op), watcher_);
  if (coalescing_) {  // a group's calls are enqueued at endCoalescing
    coalesced_.push_back({std::move(issued), work});
    inflight_.push_back(work);
    if (failed) rethrow_loom(name.c_str(), *failed);
    return work;
  }
  if (ordered && !failed) work->enqueued();
  if (!work->poll()) {
    // Calls issued before a failing one still use their buffers: keep the work until they end.
    inflight_.push_back(work);
  }
  if (failed) rethrow_loom(name.c_str(), *failed);
  return work;
}

void ProcessGroupLoom::startCoalescing() {
  std::lock_guard lk(mu_);
  TORCH_CHECK(comm_, "loom startCoalescing: the process group was shut down");
  TORCH_CHECK(!coalescing_, "loom startCoalescing: already coalescing (endCoalescing first)");
  comm_->group_start();
  coalescing_ = true;
  coalesced_.clear();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::endCoalescing() {
  std::vector<Coalesced> members;
  {
    std::lock_guard lk(mu_);
    TORCH_CHECK(coalescing_, "loom endCoalescing without startCoalescing");
    coalescing_ = false;
    members.swap(coalesced_);
  }
  std::vector<at::Tensor> outputs;
  for (const auto& m : members) {
    const auto r = m.work->result();
    outputs.insert(outputs.end(), r.begin(), r.end());
  }
  IssuedOp op = new_op(c10d::OpType::COALESCED,
                       "coalesced group of " + std::to_string(members.size()) + " calls", outputs);
  // Each member's Work copies its own staged results back when it settles: settle them here.
  op.on_success = [members] {
    for (const auto& m : members) m.work->poll();
  };
  return launch(
      std::move(op), c10d::kUnsetTimeout,
      [&members](loom::Communicator& c, const loom::CollOptions&, std::vector<loom::Work>& works) {
        c.group_end();
        for (const auto& m : members) {
          works.insert(works.end(), m.works.begin(), m.works.end());
          m.work->enqueued();  // device calls: now on the stream, so their copies back follow
        }
      });
}

namespace {

Piece allreduce_piece(const char* name, const at::Tensor& t, const c10d::ReduceOp& rop) {
  const ReduceMapping m = map_reduction(name, t.scalar_type(), rop);
  at::Tensor buf = contiguous_staging(t);
  Piece p{{t, buf}, copy_back_if_staged(t, buf), {}};
  const std::size_t count = static_cast<std::size_t>(t.numel()) * m.elems_per_element;
  if (count > 0) {
    void* ptr = buf.data_ptr();
    p.issue = [=](loom::Communicator& c, const loom::CollOptions& co) {
      return c.allreduce(ptr, ptr, count, m.dtype, m.op, with_scalar(co, m));
    };
  }
  return p;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::allreduce(std::vector<at::Tensor>& tensors,
                                                           const c10d::AllreduceOptions& opts) {
  check_single("allreduce", tensors);
  if (tensors[0].layout() == at::kSparse) return allreduce_sparse_host(tensors[0], opts);
  check_devices("allreduce", tensors);
  IssuedOp op = new_op(c10d::OpType::ALLREDUCE, "allreduce", tensors);
  return run_pieces(LOOM_TORCH_LAUNCHER, std::move(op),
                    {allreduce_piece("allreduce", tensors[0], opts.reduceOp)});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  check_devices("allreduce_coalesced", tensors);
  std::vector<Piece> pieces;
  for (const auto& t : tensors)
    pieces.push_back(allreduce_piece("allreduce_coalesced", t, opts.reduceOp));
  IssuedOp op = new_op(c10d::OpType::ALLREDUCE_COALESCED, "allreduce_coalesced", tensors);
  // One loom group: the allreduces of one dtype (and op) run as one fused allreduce.
  return run_pieces(LOOM_TORCH_LAUNCHER, std::move(op), std::move(pieces), /*grouped=*/true);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::broadcast(std::vector<at::Tensor>& tensors,
                                                           const c10d::BroadcastOptions& opts) {
  check_single("broadcast", tensors);
  check_devices("broadcast", tensors);
  TORCH_CHECK_VALUE(opts.rootRank >= 0 && opts.rootRank < size_, "loom broadcast: root ",
                    opts.rootRank, " is not a rank of this group of ", size_);
  const at::Tensor& t = tensors[0];
  at::Tensor buf = contiguous_staging(t);
  Piece p{{t, buf}, copy_back_if_staged(t, buf), {}};
  const std::size_t bytes = byte_count(t);
  if (bytes > 0) {
    void* ptr = buf.data_ptr();
    const int root = static_cast<int>(opts.rootRank);
    p.issue = [=](loom::Communicator& c, const loom::CollOptions& co) {
      return c.broadcast(ptr, ptr, bytes, loom::DataType::Uint8, root, co);
    };
  }
  IssuedOp op = new_op(c10d::OpType::BROADCAST, "broadcast", tensors);
  return run_pieces(LOOM_TORCH_LAUNCHER, std::move(op), {std::move(p)});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::reduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::ReduceOptions& opts) {
  check_single("reduce", tensors);
  check_devices("reduce", tensors);
  TORCH_CHECK_VALUE(opts.rootRank >= 0 && opts.rootRank < size_, "loom reduce: root ",
                    opts.rootRank, " is not a rank of this group of ", size_);
  const at::Tensor& t = tensors[0];
  const ReduceMapping m = map_reduction("reduce", t.scalar_type(), opts.reduceOp);
  const bool is_root = rank_ == opts.rootRank;
  at::Tensor buf = contiguous_staging(t);
  Piece p{{t, buf}, is_root ? copy_back_if_staged(t, buf) : nullptr, {}};
  const std::size_t count = static_cast<std::size_t>(t.numel()) * m.elems_per_element;
  if (count > 0) {
    void* ptr = buf.data_ptr();
    void* recv = is_root ? ptr : nullptr;  // the other ranks' tensors stay as they were
    const int root = static_cast<int>(opts.rootRank);
    p.issue = [=](loom::Communicator& c, const loom::CollOptions& co) {
      return c.reduce(ptr, recv, count, m.dtype, m.op, root, with_scalar(co, m));
    };
  }
  IssuedOp op = new_op(c10d::OpType::REDUCE, "reduce", tensors);
  return run_pieces(LOOM_TORCH_LAUNCHER, std::move(op), {std::move(p)});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::allgather_one(const char* name, c10d::OpType type,
                                                               at::Tensor output, at::Tensor input,
                                                               const c10d::AllgatherOptions& opts) {
  check_devices(name, {output, input});
  check_same_shape(name, {output}, input.scalar_type(), input.numel() * size_);
  at::Tensor in = contiguous_staging(input);
  at::Tensor out = contiguous_staging(output);
  Piece p{{in, out}, copy_back_if_staged(output, out), allgather_bytes(in, out)};
  IssuedOp op = new_op(type, name, {output});
  return run_pieces(LOOM_TORCH_LAUNCHER, std::move(op), {std::move(p)});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  return allgather_one("all_gather_into_tensor", c10d::OpType::_ALLGATHER_BASE, output, input,
                       opts);
}

namespace {

// allgather into a list of per-rank tensors: gather into one flat buffer, then copy out.
Piece allgather_list_piece(const char* name, const std::vector<at::Tensor>& outputs,
                           const at::Tensor& input, int size) {
  TORCH_CHECK_VALUE(static_cast<int>(outputs.size()) == size, "loom ", name, ": ", outputs.size(),
                    " output tensors for a group of ", size);
  check_devices(name, outputs);
  check_same_shape(name, outputs, input.scalar_type(), input.numel());
  at::Tensor in = contiguous_staging(input);
  at::Tensor flat = flat_buffer(input, size);
  Piece p{{in, flat}, {}, {}};
  p.copy_back = [outputs, flat, n = input.numel()]() mutable {
    for (std::size_t r = 0; r < outputs.size(); ++r)
      outputs[r].copy_(flat.narrow(0, static_cast<int64_t>(r) * n, n).view(outputs[r].sizes()));
  };
  p.issue = allgather_bytes(in, flat);
  return p;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  check_single("allgather", inputs);
  check_devices("allgather", inputs);
  TORCH_CHECK_VALUE(outputs.size() == 1, "loom allgather takes one output list, got ",
                    outputs.size());
  IssuedOp op = new_op(c10d::OpType::ALLGATHER, "allgather", outputs[0]);
  return run_pieces(LOOM_TORCH_LAUNCHER, std::move(op),
                    {allgather_list_piece("allgather", outputs[0], inputs[0], size_)});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  // outputs[r][i] receives rank r's inputs[i].
  const char* name = "allgather_coalesced";
  check_devices(name, inputs);
  TORCH_CHECK_VALUE(static_cast<int>(outputs.size()) == size_, "loom ", name, ": ", outputs.size(),
                    " output lists for a group of ", size_);
  for (const auto& list : outputs)
    TORCH_CHECK_VALUE(list.size() == inputs.size(), "loom ", name, ": an output list has ",
                      list.size(), " tensors for ", inputs.size(), " inputs");
  std::vector<Piece> pieces;
  std::vector<at::Tensor> all_outputs;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    std::vector<at::Tensor> per_rank;
    for (const auto& list : outputs) per_rank.push_back(list[i]);
    pieces.push_back(allgather_list_piece(name, per_rank, inputs[i], size_));
  }
  for (const auto& list : outputs) all_outputs.insert(all_outputs.end(), list.begin(), list.end());
  IssuedOp op = new_op(c10d::OpType::ALLGATHER_COALESCED, name, all_outputs);
  return run_pieces(LOOM_TORCH_LAUNCHER, std::move(op), std::move(pieces));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  const char* name = "allgather_into_tensor_coalesced";
  check_devices(name, inputs);
  TORCH_CHECK_VALUE(outputs.size() == inputs.size(), "loom ", name, ": ", outputs.size(),
                    " outputs for ", inputs.size(), " inputs");
  std::vector<Piece> pieces;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    check_devices(name, {outputs[i], inputs[i]});
    check_same_shape(name, {outputs[i]}, inputs[i].scalar_type(), inputs[i].numel() * size_);
    at::Tensor in = contiguous_staging(inputs[i]);
    at::Tensor out = contiguous_staging(outputs[i]);
    pieces.push_back({{in, out}, copy_back_if_staged(outputs[i], out), allgather_bytes(in, out)});
  }
  IssuedOp op = new_op(compat::kAllgatherIntoTensorCoalesced, name, outputs);
  return run_pieces(LOOM_TORCH_LAUNCHER, std::move(op), std::move(pieces));
}

namespace {

// reduce_scatter from a flat contiguous input of size * output.numel() elements.
Piece reduce_scatter_piece(const char* name, const at::Tensor& output, const at::Tensor& flat_in,
                           const c10d::ReduceOp& rop) {
  const ReduceMapping m = map_reduction(name, output.scalar_type(), rop);
  at::Tensor out = contiguous_staging(output);
  Piece p{{flat_in, out}, copy_back_if_staged(output, out), {}};
  const std::size_t count = static_cast<std::size_t>(output.numel()) * m.elems_per_element;
  if (count > 0) {
    const void* send = flat_in.data_ptr();
    void* recv = out.data_ptr();
    p.issue = [=](loom::Communicator& c, const loom::CollOptions& co) {
      return c.reduce_scatter(send, recv, count, m.dtype, m.op, with_scalar(co, m));
    };
  }
  return p;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  check_single("reduce_scatter", outputs);
  check_devices("reduce_scatter", outputs);
  TORCH_CHECK_VALUE(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
                    "loom reduce_scatter takes one list of ", size_, " input tensors");
  const at::Tensor& output = outputs[0];
  check_devices("reduce_scatter", inputs[0]);
  check_same_shape("reduce_scatter", inputs[0], output.scalar_type(), output.numel());
  at::Tensor flat = flat_buffer(output, size_);
  const int64_t n = output.numel();
  for (int r = 0; r < size_; ++r) flat.narrow(0, r * n, n).copy_(inputs[0][r].reshape({n}));
  IssuedOp op = new_op(c10d::OpType::REDUCE_SCATTER, "reduce_scatter", outputs);
  return run_pieces(LOOM_TORCH_LAUNCHER, std::move(op),
                    {reduce_scatter_piece("reduce_scatter", output, flat, opts.reduceOp)});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  const char* name = "reduce_scatter_tensor";
  check_devices(name, {output, input});
  check_same_shape(name, {input}, output.scalar_type(), output.numel() * size_);
  IssuedOp op = new_op(c10d::OpType::_REDUCE_SCATTER_BASE, name, {output});
  return run_pieces(LOOM_TORCH_LAUNCHER, std::move(op),
                    {reduce_scatter_piece(name, output, contiguous_staging(input), opts.reduceOp)});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const char* name = "reduce_scatter_tensor_coalesced";
  check_devices(name, outputs);
  TORCH_CHECK_VALUE(outputs.size() == inputs.size(), "loom ", name, ": ", outputs.size(),
                    " outputs for ", inputs.size(), " inputs");
  std::vector<Piece> pieces;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    check_devices(name, {outputs[i], inputs[i]});
    check_same_shape(name, {inputs[i]}, outputs[i].scalar_type(), outputs[i].numel() * size_);
    pieces.push_back(
        reduce_scatter_piece(name, outputs[i], contiguous_staging(inputs[i]), opts.reduceOp));
  }
  IssuedOp op = new_op(compat::kReduceScatterTensorCoalesced, name, outputs);
  return run_pieces(LOOM_TORCH_LAUNCHER, std::move(op), std::move(pieces));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLoom::barrier(const c10d::BarrierOptions& opts) {
  IssuedOp op = new_op(c10d::OpType::BARRIER, "barrier", {});
  Piece p{{}, {}, [](loom::Communicator& c, const loom::CollOptions& co) { return c.barrier(co); }};
  return run_pieces(LOOM_TORCH_LAUNCHER, std::move(op), {std::move(p)});
}

}  // namespace loom_torch
