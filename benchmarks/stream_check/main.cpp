// loom-stream-check: NCCL's stream semantics of device collectives, checked on the device
// runtime itself (a real GPU with --device cuda, the host simulation with --device host-sim).
//
//   loomrun -n 2 loom-stream-check [--device cuda|host-sim] [--ms 1000] [--count N]
//   loomrun -n 2 loom-stream-check --device cuda --graph global|relaxed|thread-local
//
// 1. held stream: a host function holds the stream; allreduce enqueued behind it must return
//    while the host function still holds it (it gives up after 10 s, so a call that waits for
//    the stream is told apart without a timing threshold), with the Work not complete (2+ ranks)
//    and the copy queued after it not run; after the release the result is exact.
// 2. producer: a long-running producer (CUDA: a kernel spinning --ms milliseconds on the GPU
//    timer, then writing the input; host-sim: a host function that sleeps, then writes) is
//    followed on the same stream by allreduce and a copy out. The call must return while the
//    producer still runs and within a fifth of --ms (a loom that synchronised the device or the
//    stream would wait for the kernel), and the result must be the sum of what the producers
//    wrote (the collective ran after the kernel, in stream order).
// 3. --graph MODE (CUDA only, instead of 1 and 2): captures an allreduce into a CUDA graph
//    (cudaStreamBeginCapture in that mode), replays it twice on new inputs and checks the result
//    each time. When the call, the capture, the call's Work or a replay reports an error (or a
//    replay hangs) it says "not supported" with the error and exits 4; a replay that finishes
//    without an error but with a wrong result fails (exit 1: silent corruption).
// Exit status: 0 passed, 1 a check failed, 2 usage, 3 error, 4 graph capture not supported.
#include <fmt/format.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "common/status.hpp"
#include "device/device.hpp"
#include "loom/communicator.hpp"
#include "loom/error.hpp"
#include "loom/unique_id.hpp"
#if defined(LOOM_HAVE_CUDA)
#include <cuda_runtime_api.h>

#include "benchmarks/stream_check/producer.hpp"
#endif

namespace {

using namespace loom;
using Ms = std::chrono::duration<double, std::milli>;
constexpr std::int32_t kSentinel = -1;

struct Options {
  std::string device = "cuda";
  int ms = 1000;
  std::size_t count = std::size_t{1} << 20;
  std::string graph;  // "", "global", "relaxed", "thread-local"
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string f = argv[i];
    if (i + 1 >= argc) throw std::invalid_argument(f + " needs a value");
    const std::string v = argv[++i];
    if (f == "--device") {
      o.device = v;
    } else if (f == "--ms") {
      o.ms = std::stoi(v);
    } else if (f == "--count") {
      o.count = std::stoull(v);
    } else if (f == "--graph") {
      if (v != "global" && v != "relaxed" && v != "thread-local")
        throw std::invalid_argument("--graph takes global, relaxed or thread-local");
      o.graph = v;
    } else {
      throw std::invalid_argument("unknown option '" + f + "'");
    }
  }
  if (o.ms < 50 || o.count == 0) throw std::invalid_argument("needs --ms >= 50 and --count > 0");
  return o;
}

int local_rank() {
  for (const char* name : {"LOOM_LOCAL_RANK", "LOCAL_RANK", "SLURM_LOCALID"})
    if (const char* v = std::getenv(name)) return std::atoi(v);
  return 0;
}

Communicator join(const Options& o) {
  device::Device* dev = value_or_throw(device::device_by_name(o.device));
  if (dev == nullptr) throw std::invalid_argument("no device runtime '" + o.device + "'");
  throw_if_error(dev->set_device(local_rank() % std::max(dev->device_count(), 1)));
  CommOptions co;
  co.settings["LOOM_DEVICE"] = o.device;
  for (const char* name : {"LOOM_RANK", "RANK", "SLURM_PROCID"})
    if (std::getenv(name) != nullptr) return Communicator::from_env(co);
  return Communicator(UniqueId::create("127.0.0.1:0"), 0, 1, co);
}

// A host function that holds its stream until released, giving up after `limit`.
struct Hold {
  std::mutex mu;
  std::condition_variable cv;
  bool released = false;
  bool gave_up = false;
  std::chrono::milliseconds limit{10000};
  static void fn(void* arg) {
    auto* h = static_cast<Hold*>(arg);
    std::unique_lock lk(h->mu);
    h->gave_up = !h->cv.wait_for(lk, h->limit, [&] { return h->released; });
  }
  void release() {
    {
      std::lock_guard lk(mu);
      released = true;
    }
    cv.notify_all();
  }
  bool expired() {
    std::lock_guard lk(mu);
    return gave_up;
  }
};

// host-sim's producer: sleeps, then writes the input (host-sim device memory is host memory).
struct SlowWriter {
  std::int32_t* data;
  std::size_t n;
  std::int32_t base;
  int ms;
  static void fn(void* arg) {
    auto* w = static_cast<SlowWriter*>(arg);
    std::this_thread::sleep_for(std::chrono::milliseconds(w->ms));
    for (std::size_t i = 0; i < w->n; ++i)
      w->data[i] = w->base + static_cast<std::int32_t>(i % 1000);
  }
};

class Check {
 public:
  Check(Communicator& comm, const Options& o)
      : comm_(comm), o_(o), n_(o.count), bytes_(o.count * sizeof(std::int32_t)) {
    dev_ = value_or_throw(device::device_by_name(o.device));
    s_ = value_or_throw(dev_->create_stream());
    buf_ = static_cast<std::int32_t*>(value_or_throw(dev_->alloc(bytes_)));
    buf2_ = static_cast<std::int32_t*>(value_or_throw(dev_->alloc(bytes_)));
    out_ = static_cast<std::int32_t*>(value_or_throw(dev_->alloc_pinned(bytes_)));
  }
  ~Check() {
    (void)dev_->synchronize(s_, Deadline::after(std::chrono::seconds(30)));
    dev_->free(buf_);
    dev_->free(buf2_);
    dev_->free_pinned(out_);
    dev_->destroy_stream(s_);
  }
  Check(const Check&) = delete;
  Check& operator=(const Check&) = delete;

  // 1. The stream is held by a host function.
  bool held_stream() {
    upload(7 * (comm_.rank() + 1));
    fill_out();
    Hold hold;
    throw_if_error(dev_->launch_host_fn(s_, &Hold::fn, &hold));
    const auto t0 = Clock::now();
    Work w = comm_.allreduce(buf_, buf_, n_, DataType::Int32, RedOp::Sum, opts());
    const double call_ms = Ms(Clock::now() - t0).count();
    throw_if_error(dev_->copy_async(out_, buf_, bytes_, s_));
    const bool held = !hold.expired();
    const bool pending = comm_.size() == 1 || !w.test();
    const bool untouched = out_[0] == kSentinel && out_[n_ - 1] == kSentinel;
    hold.release();
    sync();
    w.wait(std::chrono::seconds(30));
    const std::uint64_t wrong = count_wrong(7);
    return report(
        "held stream", call_ms, held && pending && untouched, wrong,
        fmt::format("held {}, Work pending {}, later copy not run {}", held, pending, untouched));
  }

  // 2. A long-running producer on the stream, then the collective.
  bool producer() {
    upload(-7);
    fill_out();
    const device::Event done = value_or_throw(dev_->create_event());
    const std::int32_t base = 1000 * (comm_.rank() + 1);
    SlowWriter writer{buf_, n_, base, o_.ms};
#if defined(LOOM_HAVE_CUDA)
    if (dev_->name() == "cuda") {
      const auto err = static_cast<cudaError_t>(
          loom_stream_check_spin(s_, buf_, n_, base, static_cast<std::uint64_t>(o_.ms) * 1000000));
      if (err != cudaSuccess)
        throw std::runtime_error(fmt::format("spin kernel launch: {}", cudaGetErrorString(err)));
    } else {
      throw_if_error(dev_->launch_host_fn(s_, &SlowWriter::fn, &writer));
    }
#else
    throw_if_error(dev_->launch_host_fn(s_, &SlowWriter::fn, &writer));
#endif
    throw_if_error(dev_->record(done, s_));
    const auto t0 = Clock::now();
    Work w = comm_.allreduce(buf_, buf_, n_, DataType::Int32, RedOp::Sum, opts());
    const double call_ms = Ms(Clock::now() - t0).count();
    throw_if_error(dev_->copy_async(out_, buf_, bytes_, s_));
    const bool running = !value_or_throw(dev_->query(done));
    const bool quick = call_ms < o_.ms / 5.0;
    sync();
    w.wait(std::chrono::seconds(30));
    dev_->destroy_event(done);
    const std::uint64_t wrong = count_wrong(1000);
    return report("producer", call_ms, running && quick, wrong,
                  fmt::format("{} ms producer still running at return {}, call under {} ms {}",
                              o_.ms, running, o_.ms / 5, quick));
  }

#if defined(LOOM_HAVE_CUDA)
  int graph(const std::string& mode);
#endif

 private:
  CollOptions opts() const {
    CollOptions c;
    c.stream = s_;
    return c;
  }
  void sync() {
    throw_if_error(dev_->synchronize(
        s_, Deadline::after(std::chrono::milliseconds(o_.ms) + std::chrono::seconds(60))));
  }
  // buf = k * (rank + 1) + i % 1000 (k passed already multiplied), through the pinned buffer.
  void upload(std::int32_t base) {
    for (std::size_t i = 0; i < n_; ++i) out_[i] = base + static_cast<std::int32_t>(i % 1000);
    throw_if_error(dev_->copy_async(buf_, out_, bytes_, s_));
    sync();
  }
  void fill_out() {
    for (std::size_t i = 0; i < n_; ++i) out_[i] = kSentinel;
  }
  // Elements of out differing from sum over ranks r of (k * (r + 1) + i % 1000).
  std::uint64_t count_wrong(std::int32_t k) const {
    const std::int32_t p = comm_.size();
    const std::int32_t bases = k * p * (p + 1) / 2;
    std::uint64_t wrong = 0;
    for (std::size_t i = 0; i < n_; ++i)
      wrong += out_[i] != bases + p * static_cast<std::int32_t>(i % 1000);
    return wrong;
  }
  // Combines every rank's verdict; rank 0 prints one line.
  bool report(std::string_view what, double call_ms, bool ok_local, std::uint64_t wrong,
              const std::string& detail) {
    double worst_ms = 0;
    std::uint64_t bad = ok_local ? 0 : 1;
    std::uint64_t bad_all = 0;
    std::uint64_t wrong_all = 0;
    comm_.allreduce(&call_ms, &worst_ms, 1, DataType::Float64, RedOp::Max).wait();
    comm_.allreduce(&bad, &bad_all, 1, DataType::Uint64, RedOp::Sum).wait();
    comm_.allreduce(&wrong, &wrong_all, 1, DataType::Uint64, RedOp::Sum).wait();
    const bool ok = bad_all == 0 && wrong_all == 0;
    if (!ok_local)
      fmt::print(stderr, "rank {}: {}: {} (call {:.2f} ms)\n", comm_.rank(), what, detail, call_ms);
    if (comm_.rank() == 0)
      fmt::print(
          "{}: {}: allreduce of {} int32 on {} ranks ({}) returned in {:.2f} ms at most; "
          "{} rank(s) failed the enqueue check, {} wrong element(s)\n",
          ok ? "ok" : "FAIL", what, n_, comm_.size(), dev_->name(), worst_ms, bad_all, wrong_all);
    std::fflush(stdout);
    return ok;
  }

  Communicator& comm_;
  const Options& o_;
  std::size_t n_;
  std::size_t bytes_;
  device::Device* dev_ = nullptr;
  device::Stream s_ = nullptr;
  std::int32_t* buf_ = nullptr;
  std::int32_t* buf2_ = nullptr;
  std::int32_t* out_ = nullptr;
};

#if defined(LOOM_HAVE_CUDA)
// 3. Capture into a CUDA graph, replay twice. Prints this rank's verdict; 0 ok, 1 wrong, exits 4
// when not supported.
int Check::graph(const std::string& mode) {
  const cudaStreamCaptureMode m = mode == "global"    ? cudaStreamCaptureModeGlobal
                                  : mode == "relaxed" ? cudaStreamCaptureModeRelaxed
                                                      : cudaStreamCaptureModeThreadLocal;
  const std::string tag = fmt::format("rank {}: graph ({} capture)", comm_.rank(), mode);
  // Exits at once: tearing down a communicator with a half-captured call would only wait for
  // its deadlines.
  auto unsupported = [&](const std::string& why) {
    fmt::print("not supported: {}: {}\n", tag, why);
    std::fflush(stdout);
    std::_Exit(4);
    return 4;
  };
  upload(7 * (comm_.rank() + 1));
  const auto cuda = static_cast<cudaStream_t>(s_);
  if (cudaError_t e = cudaStreamBeginCapture(cuda, m); e != cudaSuccess)
    return unsupported(fmt::format("cudaStreamBeginCapture: {}", cudaGetErrorString(e)));
  std::string call_error;
  Work w;
  try {
    w = comm_.allreduce(buf_, buf2_, n_, DataType::Int32, RedOp::Sum, opts());
  } catch (const Error& e) {
    call_error = e.what();
  }
  cudaGraph_t g = nullptr;
  const cudaError_t end = cudaStreamEndCapture(cuda, &g);
  (void)cudaGetLastError();
  if (!call_error.empty() || end != cudaSuccess)
    return unsupported(fmt::format("allreduce during capture: {}; cudaStreamEndCapture: {}",
                                   call_error.empty() ? "returned" : call_error,
                                   cudaGetErrorString(end)));
  // A Work that fails now is loom refusing the capture (say, polling an event recorded during
  // capture): not supported, and said so.
  for (int i = 0; i < 20; ++i) {
    try {
      if (w.test()) break;
    } catch (const Error& e) {
      return unsupported(fmt::format("the captured allreduce's Work failed: {}", e.what()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  cudaGraphExec_t exec = nullptr;
  if (cudaError_t e = cudaGraphInstantiate(&exec, g, 0); e != cudaSuccess)
    return unsupported(fmt::format("cudaGraphInstantiate: {}", cudaGetErrorString(e)));
  // Each replay gets new inputs and a poisoned output, so that a collective that ran at capture
  // time instead of inside the graph cannot pass.
  for (const std::int32_t k : {11, 13}) {
    upload(k * (comm_.rank() + 1));
    fill_out();
    throw_if_error(dev_->copy_async(buf2_, out_, bytes_, s_));
    if (cudaError_t e = cudaGraphLaunch(exec, cuda); e != cudaSuccess)
      return unsupported(fmt::format("cudaGraphLaunch: {}", cudaGetErrorString(e)));
    throw_if_error(dev_->copy_async(out_, buf2_, bytes_, s_));
    if (!dev_->synchronize(s_, Deadline::after(std::chrono::seconds(20))).is_ok())
      return unsupported(fmt::format("a replay did not finish in 20 s"));
    if (const std::uint64_t wrong = count_wrong(k); wrong > 0) {
      fmt::print(
          "FAIL: {}: a replay finished without an error but {} element(s) of {} are wrong: the "
          "capture was neither refused nor honoured\n",
          tag, wrong, n_);
      return 1;
    }
  }
  std::string work_state;
  try {
    work_state = w.test() ? "complete" : "pending";
  } catch (const Error& e) {
    work_state = std::string("failed: ") + e.what();
  }
  fmt::print(
      "ok: {}: allreduce captured, replayed twice on new inputs, result exact (the captured "
      "call's Work: {})\n",
      tag, work_state);
  (void)cudaGraphExecDestroy(exec);
  (void)cudaGraphDestroy(g);
  return 0;
}
#endif

int run(const Options& o) {
  Communicator comm = join(o);
  Check check(comm, o);
  if (!o.graph.empty()) {
#if defined(LOOM_HAVE_CUDA)
    if (o.device == "cuda") return check.graph(o.graph);
#endif
    fmt::print("not supported: graph capture needs --device cuda on a CUDA build\n");
    return 4;
  }
  const bool held = check.held_stream();
  const bool produced = check.producer();
  return held && produced ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    o = parse(argc, argv);
  } catch (const std::exception& e) {
    fmt::print(stderr,
               "loom-stream-check: {}\nusage: loom-stream-check [--device cuda|host-sim] "
               "[--ms MS] [--count N] [--graph global|relaxed|thread-local]\n",
               e.what());
    return 2;
  }
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "loom-stream-check: error: {}\n", e.what());
    return 3;
  }
}
