// loom-kernel-bench on a device runtime: the reduction kernels (kernels/cuda) against a
// device-to-device copy of the same size, measured in the same run (the memory's limit), each
// kernel's output checked bit for bit against the host kernels. Timing follows the usual rules
// for device work: random finite inputs (never zeros), a warm-up launch, batches of launches
// timed with CUDA events (host clock around a synchronised stream on host-sim), the median of
// five batches, and on CUDA the inputs rotate over enough buffer sets that the L2 cache cannot
// hold them.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "benchmarks/kernel_bench/kernel_bench.hpp"
#include "common/deadline.hpp"
#include "common/status.hpp"
#include "device/device.hpp"
#include "kernels/host/reduce.hpp"
#if defined(LOOM_HAVE_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace loom::kbench {
namespace {

constexpr int kBatches = 5;
// On CUDA the inputs of successive launches rotate over about this many bytes of buffers:
// several times the L2 of any current GPU (50 MB on an H100, 60 MB on an H200).
constexpr std::size_t kRotateBytes = std::size_t{512} << 20;
constexpr int kMaxSets = 128;

Deadline wait_deadline() {
  return Deadline::after(std::chrono::minutes(2));
}

// xorshift64*: fast enough to fill a GiB of inputs.
struct Rng {
  std::uint64_t s;
  std::uint64_t next() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 2685821657736338717ULL;
  }
  // Uniform in (-64, 64): finite in every float type loom has, fp8 included.
  float real() {
    const auto m = static_cast<std::int64_t>(next() >> 11) - (std::int64_t{1} << 52);
    return static_cast<float>(m) * (64.0f / 4503599627370496.0f);
  }
};

template <typename T, typename Gen>
void fill(void* out, std::size_t count, Gen gen) {
  auto* p = static_cast<T*>(out);
  for (std::size_t i = 0; i < count; ++i) p[i] = gen();
}

// Random values of type `t`: finite floats (no NaN, whose payload IEEE leaves open, so a
// bit-for-bit check would be unfair), any bits for integers.
void fill_random(DataType t, void* out, std::size_t count, std::uint64_t seed) {
  Rng rng{seed * 0x9E3779B97F4A7C15ULL + 1};
  switch (t) {
    case DataType::Float32: return fill<float>(out, count, [&] { return rng.real(); });
    case DataType::Float64:
      return fill<double>(out, count, [&] { return static_cast<double>(rng.real()); });
    case DataType::Float16:
      return fill<std::uint16_t>(out, count, [&] { return kernels::float_to_half(rng.real()); });
    case DataType::BFloat16:
      return fill<std::uint16_t>(out, count,
                                 [&] { return kernels::float_to_bfloat16(rng.real()); });
    case DataType::Float8E4M3:
      return fill<std::uint8_t>(out, count, [&] { return kernels::float_to_fp8_e4m3(rng.real()); });
    case DataType::Float8E5M2:
      return fill<std::uint8_t>(out, count, [&] { return kernels::float_to_fp8_e5m2(rng.real()); });
    default: {
      const std::size_t bytes = count * dtype_size(t);
      auto* p = static_cast<std::uint8_t*>(out);
      for (std::size_t i = 0; i < bytes; i += 8) {
        const std::uint64_t v = rng.next();
        std::memcpy(p + i, &v, std::min<std::size_t>(8, bytes - i));
      }
    }
  }
}

#if defined(LOOM_HAVE_CUDA)
void check_cuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw std::runtime_error(
        fmt::format("{} failed: {} ({})", what, cudaGetErrorString(err), cudaGetErrorName(err)));
}
#endif

// Times the work a stream does between start() and stop(): CUDA events on the cuda runtime,
// else the host clock around a synchronised stream.
class Timer {
 public:
  Timer(device::Device& dev, device::Stream s) : dev_(dev), s_(s) {
#if defined(LOOM_HAVE_CUDA)
    if (dev.name() == "cuda") {
      check_cuda(cudaEventCreate(&begin_), "cudaEventCreate");
      check_cuda(cudaEventCreate(&end_), "cudaEventCreate");
      events_ = true;
    }
#endif
  }
  ~Timer() {
#if defined(LOOM_HAVE_CUDA)
    if (events_) {
      (void)cudaEventDestroy(begin_);
      (void)cudaEventDestroy(end_);
    }
#endif
  }
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;
  [[nodiscard]] const char* how() const {
    return events_ ? "CUDA events" : "host clock around a synchronised stream";
  }

  void start() {
#if defined(LOOM_HAVE_CUDA)
    if (events_) {
      check_cuda(cudaEventRecord(begin_, static_cast<cudaStream_t>(s_)), "cudaEventRecord");
      return;
    }
#endif
    throw_if_error(dev_.synchronize(s_, wait_deadline()));
    t0_ = Clock::now();
  }
  double stop() {
#if defined(LOOM_HAVE_CUDA)
    if (events_) {
      check_cuda(cudaEventRecord(end_, static_cast<cudaStream_t>(s_)), "cudaEventRecord");
      const Deadline deadline = wait_deadline();
      for (;;) {  // cudaEventSynchronize has no deadline
        const cudaError_t err = cudaEventQuery(end_);
        if (err == cudaSuccess) break;
        if (err != cudaErrorNotReady) check_cuda(err, "cudaEventQuery");
        if (deadline.expired()) throw std::runtime_error("the device did not finish in 2 minutes");
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
      float ms = 0;
      check_cuda(cudaEventElapsedTime(&ms, begin_, end_), "cudaEventElapsedTime");
      return static_cast<double>(ms) * 1e-3;
    }
#endif
    throw_if_error(dev_.synchronize(s_, wait_deadline()));
    return std::chrono::duration<double>(Clock::now() - t0_).count();
  }

 private:
  device::Device& dev_;
  device::Stream s_;
  bool events_ = false;
  Clock::time_point t0_{};
#if defined(LOOM_HAVE_CUDA)
  cudaEvent_t begin_ = nullptr;
  cudaEvent_t end_ = nullptr;
#endif
};

// `sets` groups of three buffers (x, y -> z) of `bytes` each, in one allocation.
class Pool {
 public:
  Pool(device::Device& dev, std::size_t bytes, int sets) : dev_(dev), bytes_(bytes), sets_(sets) {
    base_ = static_cast<std::uint8_t*>(value_or_throw(dev.alloc(3 * bytes * sets)));
  }
  ~Pool() { dev_.free(base_); }
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;
  [[nodiscard]] int sets() const { return sets_; }
  [[nodiscard]] void* x(int i) const { return at(i, 0); }
  [[nodiscard]] void* y(int i) const { return at(i, 1); }
  [[nodiscard]] void* z(int i) const { return at(i, 2); }

 private:
  [[nodiscard]] void* at(int i, int which) const {
    return base_ + (3 * static_cast<std::size_t>(i % sets_) + which) * bytes_;
  }
  device::Device& dev_;
  std::size_t bytes_;
  int sets_;
  std::uint8_t* base_ = nullptr;
};

struct Bench {
  const Args& a;
  device::Device& dev;
  device::Stream s;
  Timer timer;
  std::vector<std::uint8_t> hx, hy, hz, ref;  // host inputs, device output, host reference
  std::uint64_t wrong_rows = 0;

  Bench(const Args& args, device::Device& d, device::Stream st)
      : a(args), dev(d), s(st), timer(d, st) {}

  void sync() { throw_if_error(dev.synchronize(s, wait_deadline())); }

  // Median seconds per launch over kBatches batches of a.iters launches, after a warm-up;
  // launch i uses buffer set i.
  double time_launches(const std::function<void(int)>& launch) {
    launch(0);
    std::vector<double> per;
    int next = 1;
    for (int b = 0; b < kBatches; ++b) {
      timer.start();
      for (int i = 0; i < a.iters; ++i) launch(next++);
      per.push_back(timer.stop() / a.iters);
    }
    std::sort(per.begin(), per.end());
    return per[kBatches / 2];
  }

  // Uploads hx, hy (n bytes) to set 0 and copies them to every other set.
  void upload(Pool& pool, std::size_t n) {
    throw_if_error(dev.copy_async(pool.x(0), hx.data(), n, s));
    throw_if_error(dev.copy_async(pool.y(0), hy.data(), n, s));
    for (int i = 1; i < pool.sets(); ++i) {
      throw_if_error(dev.copy_async(pool.x(i), pool.x(0), n, s));
      throw_if_error(dev.copy_async(pool.y(i), pool.y(0), n, s));
    }
    sync();
  }

  // One launch on set 0 into a poisoned output, against the host kernels: the number of
  // elements that differ (any bit).
  std::uint64_t check(DataType t, RedOp op, Pool& pool, std::size_t count) {
    const std::size_t es = dtype_size(t);
    const std::size_t n = count * es;
    std::memset(hz.data(), 0xA5, n);
    throw_if_error(dev.copy_async(pool.z(0), hz.data(), n, s));
    throw_if_error(dev.reduce_async(t, op, pool.z(0), pool.x(0), pool.y(0), count, s));
    throw_if_error(dev.copy_async(hz.data(), pool.z(0), n, s));
    sync();
    kernels::reduce(t, op, ref.data(), hx.data(), hy.data(), count);
    if (std::memcmp(hz.data(), ref.data(), n) == 0) return 0;
    std::uint64_t wrong = 0;
    for (std::size_t i = 0; i < n; i += es) wrong += std::memcmp(&hz[i], &ref[i], es) != 0;
    return wrong;
  }

  void row(std::size_t bytes, std::string_view type, std::string_view op, double sec, double moved,
           double copy_gbs, std::string_view check) {
    const double gbs = moved / sec / 1e9;
    const std::string of_copy =
        copy_gbs > 0 ? fmt::format("{:.0f}%", 100.0 * gbs / copy_gbs) : std::string("-");
    fmt::print("{:>12}  {:>9}  {:>5}  {:>10.2f}  {:>8.1f}  {:>7}  {}\n", bytes, type, op, sec * 1e6,
               gbs, of_copy, check);
    std::fflush(stdout);
  }

  void size(std::size_t bytes) {
    const int sets =
        dev.name() == "cuda"
            ? static_cast<int>(std::clamp<std::size_t>(kRotateBytes / (3 * bytes), 1, kMaxSets))
            : 1;
    Pool pool(dev, bytes, sets);
    double copy_gbs = 0;
    if (a.copy) {
      fill_random(DataType::Uint8, hx.data(), bytes, bytes);
      fill_random(DataType::Uint8, hy.data(), bytes, bytes + 1);
      upload(pool, bytes);
      const double sec = time_launches(
          [&](int i) { throw_if_error(dev.copy_async(pool.z(i), pool.x(i), bytes, s)); });
      copy_gbs = 2.0 * static_cast<double>(bytes) / sec / 1e9;
      row(bytes, "copy", "-", sec, 2.0 * static_cast<double>(bytes), 0, "-");
    }
    for (DataType t : a.dtypes) {
      const std::size_t count = bytes / dtype_size(t);
      const std::size_t n = count * dtype_size(t);
      if (count == 0) continue;
      fill_random(t, hx.data(), count, 2 * bytes + static_cast<std::uint64_t>(t));
      fill_random(t, hy.data(), count, 3 * bytes + static_cast<std::uint64_t>(t));
      upload(pool, n);
      for (RedOp op : a.ops) {
        if (!supports(t, op)) continue;  // bitwise ops: integer types only
        const double sec = time_launches([&](int i) {
          throw_if_error(dev.reduce_async(t, op, pool.z(i), pool.x(i), pool.y(i), count, s));
        });
        std::string verdict = "-";
        if (a.check) {
          const std::uint64_t wrong = check(t, op, pool, count);
          verdict = wrong == 0 ? "ok" : fmt::format("WRONG: {} of {} elements", wrong, count);
          wrong_rows += wrong != 0;
        }
        row(n, to_string(t), to_string(op), sec, 3.0 * static_cast<double>(n), copy_gbs, verdict);
      }
    }
  }
};

void print_device(device::Device& dev) {
#if defined(LOOM_HAVE_CUDA)
  if (dev.name() == "cuda") {
    int d = 0;
    cudaDeviceProp p{};
    check_cuda(cudaGetDevice(&d), "cudaGetDevice");
    check_cuda(cudaGetDeviceProperties(&p, d), "cudaGetDeviceProperties");
    int rt = 0;
    int drv = 0;
    (void)cudaRuntimeGetVersion(&rt);
    (void)cudaDriverGetVersion(&drv);
    fmt::print(
        "# device {}: {} (sm_{}{}), {} SMs, L2 {} MiB, {:.1f} GiB; CUDA runtime {}, driver {}\n", d,
        p.name, p.major, p.minor, p.multiProcessorCount, p.l2CacheSize >> 20,
        static_cast<double>(p.totalGlobalMem) / (1 << 30), rt, drv);
    return;
  }
#endif
  fmt::print("# device: {} (the host simulation: logic, not a speed figure)\n", dev.name());
}

}  // namespace

int run_device(const Args& a) {
  device::Device* dev = value_or_throw(device::device_by_name(a.device));
  if (dev == nullptr) throw std::invalid_argument("no device runtime ('" + a.device + "')");
  const device::Stream s = value_or_throw(dev->create_stream());
  const std::vector<std::size_t> sizes = size_list(a);
  const std::size_t max = *std::max_element(sizes.begin(), sizes.end());
  {
    Bench b(a, *dev, s);
    for (auto* v : {&b.hx, &b.hy, &b.hz, &b.ref}) v->resize(max);
    print_device(*dev);
    fmt::print(
        "# loom-kernel-bench on {}: median of {} batches of {} launches, timed with {}{}; "
        "GB/s counts bytes read + written (reduce: 3 x bytes, copy: 2 x bytes); 'of copy': "
        "GB/s against the copy at the same size; check: output against the host kernels, "
        "bit for bit\n",
        dev->name(), kBatches, a.iters, b.timer.how(),
        dev->name() == "cuda" ? "; inputs rotate over up to 512 MiB of buffers (beyond L2)" : "");
    fmt::print("{:>12}  {:>9}  {:>5}  {:>10}  {:>8}  {:>7}  {}\n", "bytes", "type", "op",
               "time(us)", "GB/s", "of copy", "check");
    for (std::size_t bytes : sizes) b.size(bytes);
    if (b.wrong_rows > 0) {
      fmt::print(stderr, "loom-kernel-bench: {} row(s) with wrong values\n", b.wrong_rows);
      dev->destroy_stream(s);
      return 1;
    }
  }
  dev->destroy_stream(s);
  return 0;
}

}  // namespace loom::kbench
