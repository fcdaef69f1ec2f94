// c10d::Work over one or more loom::Work handles (one per loom call a torch op became).
//
// Completion ("settling") happens exactly once, on whichever thread sees the loom operations
// finish first: a caller in wait(), isCompleted(), the backend reaping finished work before
// its next call, or the completion watcher that serves futures. Settling copies staged
// results back into the caller's tensors, completes the Future with the output tensors (or
// sets its error) and marks the c10d Work completed. The Work owns every tensor a loom
// operation reads or writes until then.
//
// CUDA tensors run stream-ordered, as in ProcessGroupNCCL: the loom calls are enqueued on the
// current stream of the tensors' device, the copies back of staged results follow them on that
// stream, and the future completes at once with CUDA events on it (enqueued()); wait() makes
// the caller's current stream wait for the op instead of blocking the host.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <c10/core/Event.h>
#include <c10/core/Stream.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <loom/error.hpp>
#include <loom/work.hpp>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <vector>

namespace loom_torch {

class CompletionWatcher;

/// What a torch op issued: its loom calls and what the result needs.
struct IssuedOp {
  c10d::OpType type = c10d::OpType::UNKNOWN;
  std::string name;  // "allreduce", "_allgather_base", ... (for errors)
  int rank = -1;
  std::vector<at::Tensor> outputs;     // result() and the future's value
  std::vector<at::Tensor> keep_alive;  // inputs and staging buffers the loom calls use
  std::function<void()> on_success;    // copies staged results back; may be empty
  std::vector<loom::Work> works;       // in issue order
  /// Device tensors: the stream the loom calls are ordered on (the device's current stream at
  /// issue); nullopt for host tensors.
  std::optional<c10::Stream> stream;
  /// loom's view of the communicator when an op fails (status(): failed ranks, the last
  /// timeout report naming the ranks that lagged), appended to the error; may be empty.
  std::function<std::string()> failure_context;
  /// A receive from any source: where loom writes the sender's rank (sourceRank()).
  std::shared_ptr<int> source;
};

class LoomWork : public c10d::Work {
 public:
  LoomWork(IssuedOp op, std::shared_ptr<CompletionWatcher> watcher);
  ~LoomWork() override;

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override;
  /// Blocks until every loom call finished (each bounded by its own deadline); with a timeout
  /// (> 0), raises DistBackendError after that long while the operation keeps running.
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void synchronize() override {}
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  /// The sender of a completed receive from any source (torch's irecv(src=None)).
  int sourceRank() const override;

  /// Stream-ordered ops, once their loom calls are enqueued (launch, or endCoalescing for the
  /// calls of a group): copies staged results back on the op's stream, records the op's end
  /// there and completes the future with events on it. Called with that stream current.
  void enqueued();
  /// Non-blocking: settles the work if its loom calls are done. True once settled.
  bool poll();
  /// Blocks until the loom calls finish (their own deadlines bound this), then settles.
  void drive();

 private:
  /// True when every loom call finished (successfully or not); never blocks.
  bool loom_done(std::exception_ptr& error);
  void settle(std::exception_ptr error);
  std::exception_ptr torch_error(const loom::Error& e) const;
  void rethrow_if_failed() const;

  IssuedOp op_;
  std::shared_ptr<CompletionWatcher> watcher_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::mutex settle_mu_;
  std::atomic<bool> settled_{false};
  std::atomic<bool> watched_{false};
  std::optional<c10::Event> end_;  // stream-ordered ops: recorded on the stream after the op
};

/// One thread per backend, started by the first get_future(): it waits for watched works in
/// order and settles them, so that futures complete without anyone calling wait() (DDP's
/// communication hooks only chain on the future).
class CompletionWatcher {
 public:
  CompletionWatcher() = default;
  ~CompletionWatcher();
  CompletionWatcher(const CompletionWatcher&) = delete;
  CompletionWatcher& operator=(const CompletionWatcher&) = delete;

  void watch(c10::intrusive_ptr<LoomWork> work);
  /// Settles everything queued, then ends the thread.
  void stop();

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<c10::intrusive_ptr<LoomWork>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

/// A DistBackendError (torch.distributed.DistBackendError in Python) carrying `message`.
std::exception_ptr make_backend_error(const std::string& message);

}  // namespace loom_torch
