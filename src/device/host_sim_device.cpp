// The host simulation of the device seam (see device.hpp). Device memory is aligned host memory
// recorded in a registry (so pointer_kind tells it apart like cudaPointerGetAttributes); every
// stream is an in-order queue drained by its own thread (so work enqueued on it really runs
// later and asynchronously, as on a GPU); an event is a pair of counters; a kernel launch runs
// the CUDA kernels' logic over an emulated grid. Eight simulated GPUs: peer access between
// devices of the same group of four ("NVLink island"), none across, so peer probing has both
// answers. IPC handles open only inside the exporting process (ranks as threads).
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "device/host_sim.hpp"
#include "device/host_sim_kernels.hpp"
#include "device/nvlink.hpp"
#include "log/log.hpp"

namespace loom::device {
namespace {

constexpr int kSimDevices = 8;
constexpr int kSimSms = 4;                        // grid shape of the emulated launches
constexpr std::uint32_t kIpcMagic = 0x4c4d5349;   // "LMSI"
std::atomic<std::uint64_t> g_reduce_launches{0};  // diagnostics for tests (see host_sim.hpp)
std::atomic<std::uint64_t> g_flushes{0};
std::atomic<std::uint64_t> g_sync_hazards{0};
std::atomic<std::uint64_t> g_multi_launches{0};
std::atomic<std::uint64_t> g_ipc_opens{0};
std::atomic<std::uint64_t> g_ipc_closes{0};
std::atomic<bool> g_reuse_addresses{false};

// CUDA's cudaFree and cudaFreeHost wait for the whole device, so one called while a host
// function holds a stream (loom's stream gate, which waits for a collective) waits for that
// function. host-sim keeps count of the host functions running; a free waits for them (briefly)
// and, when one is still running, counts a hazard: on CUDA that free could deadlock.
std::mutex g_host_fn_mu;
std::condition_variable g_host_fn_cv;
int g_host_fns_running = 0;
constexpr auto kHostFnPatience = std::chrono::seconds(2);

void run_host_fn(HostFn fn, void* arg) {
  {
    std::lock_guard lk(g_host_fn_mu);
    ++g_host_fns_running;
  }
  fn(arg);
  {
    std::lock_guard lk(g_host_fn_mu);
    --g_host_fns_running;
  }
  g_host_fn_cv.notify_all();
}

// A stream waiting for a memory word (cuStreamWaitValue32) holds it like a host function does:
// counted alike, so a free meanwhile is a hazard too. On CUDA the wait has no end; here it ends
// after kWaitValuePatience with an error, so that a test that never opens it fails, not hangs.
constexpr auto kWaitValuePatience = std::chrono::seconds(120);
std::atomic<std::uint64_t> g_value_waits{0};

// `holds`: the word is one this process's host writes (pinned memory: a stream gate), so the
// wait counts as holding the stream; a word that peers write (registered shared memory: the
// peer-read route's flags) does not: a free meanwhile waits only for the peers' streams.
void wait_for_value(const std::uint32_t* word, std::uint32_t value, bool holds) {
  if (holds) {
    std::lock_guard lk(g_host_fn_mu);
    ++g_host_fns_running;
  }
  g_value_waits.fetch_add(1, std::memory_order_relaxed);
  std::atomic_ref<std::uint32_t> w(*const_cast<std::uint32_t*>(word));  // read only
  const auto until = std::chrono::steady_clock::now() + kWaitValuePatience;
  auto reached = [&] {
    return static_cast<std::int32_t>(w.load(std::memory_order_acquire) - value) >= 0;
  };
  for (int spins = 0; !reached(); ++spins) {
    if (std::chrono::steady_clock::now() >= until) {
      LOOM_LOG_ERROR(Cuda, "host-sim: a stream waited {} s for a memory word to reach {}; going on",
                     kWaitValuePatience.count(), value);
      break;
    }
    if (spins < 64)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  if (!holds) return;
  {
    std::lock_guard lk(g_host_fn_mu);
    --g_host_fns_running;
  }
  g_host_fn_cv.notify_all();
}

void wait_like_a_synchronising_free(std::string_view what) {
  std::unique_lock lk(g_host_fn_mu);
  if (g_host_fn_cv.wait_for(lk, kHostFnPatience, [] { return g_host_fns_running == 0; })) return;
  g_sync_hazards.fetch_add(1, std::memory_order_relaxed);
  LOOM_LOG_ERROR(Cuda,
                 "host-sim: {} while a host function holds a stream for more than {} s: "
                 "on CUDA this free waits for the whole device and could deadlock",
                 what, kHostFnPatience.count());
}
// The calling thread's visible devices (host_sim_set_visible_devices); empty: all, in order.
thread_local std::vector<int> t_visible;

int physical(int ordinal) {
  return t_visible.empty() ? ordinal : t_visible[static_cast<std::size_t>(ordinal)];
}
int visible_count() {
  return t_visible.empty() ? kSimDevices : static_cast<int>(t_visible.size());
}
// host-sim's GPUs sit at PCI buses 0x10..0x17 (one per physical device).
std::string sim_bus_id(int phys) {
  return fmt::format("0000:{:02x}:00.0", 0x10 + phys);
}
int sim_physical_of(std::string_view bus_id) {
  for (int d = 0; d < kSimDevices; ++d)
    if (canonical_bus_id(bus_id) == sim_bus_id(d)) return d;
  return -1;
}
bool sim_peers(int a, int b) {
  return a >= 0 && b >= 0 && a != b && a / 4 == b / 4;
}

/// One in-order stream: a queue of closures run by a worker thread.
class SimStream {
 public:
  explicit SimStream(int device) : device_(device), worker_([this] { loop(); }) {}
  [[nodiscard]] int device() const { return device_; }
  ~SimStream() {
    {
      std::lock_guard lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();  // runs what was queued first, like a CUDA stream being destroyed
  }
  void enqueue(std::function<void()> fn) {
    {
      std::lock_guard lk(mu_);
      queue_.push_back(std::move(fn));
      ++enqueued_;
    }
    cv_.notify_all();
  }
  std::atomic<bool> capturing{false};  // host_sim_set_capturing
  bool wait_idle(Deadline deadline) {
    std::unique_lock lk(mu_);
    const std::uint64_t target = enqueued_;
    return idle_cv_.wait_until(lk, deadline.at(), [&] { return finished_ >= target; });
  }

 private:
  void loop() {
    std::unique_lock lk(mu_);
    for (;;) {
      cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and drained
      auto fn = std::move(queue_.front());
      queue_.pop_front();
      lk.unlock();
      fn();
      lk.lock();
      ++finished_;
      idle_cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable idle_cv_;
  std::deque<std::function<void()>> queue_;
  std::uint64_t enqueued_ = 0;
  std::uint64_t finished_ = 0;
  bool stop_ = false;
  int device_;  // the device current when it was created
  std::thread worker_;
};

struct SimEvent {
  std::mutex mu;
  std::condition_variable cv;  // reached moved
  std::uint64_t recorded = 0;
  std::uint64_t reached = 0;
};

class HostSimDevice final : public Device {
 public:
  std::string_view name() const override { return "host-sim"; }
  int device_count() const override { return visible_count(); }
  // Like CUDA, the current device belongs to the calling thread (ranks as threads pick theirs).
  Result<int> current_device() override { return current_; }
  Status set_device(int dev) override {
    if (dev < 0 || dev >= visible_count())
      return make_error(ErrorCode::InvalidArgument, "host-sim: no device {}", dev);
    current_ = dev;
    return Status::ok();
  }

  Result<MemoryKind> pointer_kind(const void* p) override {
    std::lock_guard lk(mu_);
    return find(p) != nullptr ? MemoryKind::Device : MemoryKind::Host;
  }
  Result<void*> alloc(std::size_t bytes) override {
    void* p = reused(round_up(bytes));
    if (!p) p = std::aligned_alloc(256, round_up(bytes));
    if (!p) return make_error(ErrorCode::SystemError, "host-sim: cannot allocate {} bytes", bytes);
    std::lock_guard lk(mu_);
    allocations_[reinterpret_cast<std::uintptr_t>(p)] = Allocation{bytes, ++next_id_};
    return p;
  }
  Result<device::Allocation> allocation(const void* p) override {
    std::lock_guard lk(mu_);
    const auto addr = reinterpret_cast<std::uintptr_t>(p);
    auto it = allocations_.upper_bound(addr);
    if (it == allocations_.begin() || addr >= std::prev(it)->first + std::prev(it)->second.bytes)
      return make_error(ErrorCode::InvalidArgument, "host-sim: {} is not in a device allocation",
                        p);
    --it;
    device::Allocation a;
    a.base = reinterpret_cast<void*>(it->first);  // NOLINT(performance-no-int-to-ptr)
    a.bytes = it->second.bytes;
    a.id = it->second.id;
    return a;
  }
  void drop_stash() {
    std::lock_guard lk(mu_);
    for (auto& [thread, blocks] : stash_)
      for (auto& [bytes, p] : blocks) std::free(p);
    stash_.clear();
  }
  void refuse_ipc(const void* p) {
    std::lock_guard lk(mu_);
    const auto addr = reinterpret_cast<std::uintptr_t>(p);
    auto it = allocations_.upper_bound(addr);
    if (it != allocations_.begin()) std::prev(it)->second.ipc_refused = true;
  }
  std::uint64_t allocation_id(const void* p) override {
    std::lock_guard lk(mu_);
    const Allocation* a = find(p);
    return a != nullptr ? a->id : 0;
  }
  void free(void* p) override {
    if (!p) return;
    wait_like_a_synchronising_free("free (cudaFree)");
    std::lock_guard lk(mu_);
    auto it = allocations_.find(reinterpret_cast<std::uintptr_t>(p));
    const std::size_t bytes = it != allocations_.end() ? round_up(it->second.bytes) : 0;
    if (it != allocations_.end()) allocations_.erase(it);
    if (g_reuse_addresses.load() && bytes > 0) {
      stash_[std::this_thread::get_id()].emplace_back(bytes, p);  // the next of this size
      return;
    }
    std::free(p);
  }
  Result<void*> alloc_pinned(std::size_t bytes) override {
    const std::size_t rounded = (bytes + 4095) & ~std::size_t{4095};
    void* p = std::aligned_alloc(4096, rounded);
    if (!p) return make_error(ErrorCode::SystemError, "host-sim: cannot pin {} bytes", bytes);
    std::lock_guard lk(mu_);
    pinned_[reinterpret_cast<std::uintptr_t>(p)] = rounded;
    return p;
  }
  void free_pinned(void* p) override {
    if (!p) return;
    wait_like_a_synchronising_free("free_pinned (cudaFreeHost)");
    {
      std::lock_guard lk(mu_);
      pinned_.erase(reinterpret_cast<std::uintptr_t>(p));
    }
    std::free(p);
  }

  Result<Stream> create_stream() override { return static_cast<Stream>(new SimStream(current_)); }
  void destroy_stream(Stream s) override { delete static_cast<SimStream*>(s); }
  Status copy_async(void* dst, const void* src, std::size_t bytes, Stream s) override {
    if (bytes) stream(s).enqueue([=] { std::memmove(dst, src, bytes); });
    return Status::ok();
  }
  Status wait_value(Stream s, const std::uint32_t* word, std::uint32_t value) override {
    if (word == nullptr)
      return make_error(ErrorCode::InvalidArgument, "host-sim: wait_value on null");
    const bool holds = pinned(word);
    stream(s).enqueue([=] { wait_for_value(word, value, holds); });
    return Status::ok();
  }
  Status write_value(Stream s, std::uint32_t* word, std::uint32_t value) override {
    if (word == nullptr)
      return make_error(ErrorCode::InvalidArgument, "host-sim: write_value to null");
    stream(s).enqueue(
        [=] { std::atomic_ref<std::uint32_t>(*word).store(value, std::memory_order_release); });
    return Status::ok();
  }
  Status launch_host_fn(Stream s, HostFn fn, void* arg) override {
    stream(s).enqueue([=] { run_host_fn(fn, arg); });
    return Status::ok();
  }
  // An event handle owns a reference; a record() queued on a stream holds another, so an event
  // may be destroyed while its record is pending (as cudaEventDestroy allows).
  Result<Event> create_event() override {
    return static_cast<Event>(new std::shared_ptr<SimEvent>(std::make_shared<SimEvent>()));
  }
  void destroy_event(Event e) override { delete static_cast<std::shared_ptr<SimEvent>*>(e); }
  Status record(Event e, Stream s) override {
    std::shared_ptr<SimEvent> ev = *static_cast<std::shared_ptr<SimEvent>*>(e);
    std::uint64_t mark = 0;
    {
      std::lock_guard lk(ev->mu);
      mark = ++ev->recorded;
    }
    stream(s).enqueue([ev, mark] {
      {
        std::lock_guard lk(ev->mu);
        if (ev->reached < mark) ev->reached = mark;
      }
      ev->cv.notify_all();
    });
    return Status::ok();
  }
  // Like cudaStreamWaitEvent: waits for the record() made before this call (as wait_value, it
  // gives up after kWaitValuePatience with an error, so that a test fails rather than hangs).
  Status wait_event(Stream s, Event e) override {
    std::shared_ptr<SimEvent> ev = *static_cast<std::shared_ptr<SimEvent>*>(e);
    std::uint64_t mark = 0;
    {
      std::lock_guard lk(ev->mu);
      mark = ev->recorded;
    }
    stream(s).enqueue([ev, mark] {
      std::unique_lock lk(ev->mu);
      if (!ev->cv.wait_for(lk, kWaitValuePatience, [&] { return ev->reached >= mark; }))
        LOOM_LOG_ERROR(Cuda, "host-sim: a stream waited {} s for an event; going on",
                       kWaitValuePatience.count());
    });
    return Status::ok();
  }
  Result<bool> query(Event e) override {
    SimEvent* ev = static_cast<std::shared_ptr<SimEvent>*>(e)->get();
    std::lock_guard lk(ev->mu);
    return ev->reached >= ev->recorded;
  }
  Status synchronize(Stream s, Deadline deadline) override {
    if (stream(s).wait_idle(deadline)) return Status::ok();
    return make_error(ErrorCode::Timeout, "host-sim: stream {} still busy at its deadline", s);
  }

  Result<bool> is_capturing(Stream s) override { return stream(s).capturing.load(); }

  Status reduce_async(DataType dtype, RedOp op, void* dst, const void* a, const void* b,
                      std::size_t count, Stream s) override {
    LOOM_RETURN_IF_ERROR(check_launch(s));
    g_reduce_launches.fetch_add(1, std::memory_order_relaxed);
    stream(s).enqueue([=] { sim::reduce(dtype, op, dst, a, b, count, kSimSms); });
    return Status::ok();
  }
  Status divide_async(DataType dtype, void* x, std::size_t count, int n, Stream s) override {
    LOOM_RETURN_IF_ERROR(check_launch(s));
    stream(s).enqueue([=] { sim::divide(dtype, x, count, n, kSimSms); });
    return Status::ok();
  }
  Status reduce_multi_async(const MultiReduce& m, Stream s) override {
    if (m.nsrc < 1 || m.nsrc > kMaxMultiBuffers || m.ndst < 1 || m.ndst > kMaxMultiBuffers)
      return make_error(ErrorCode::InvalidArgument,
                        "host-sim: multi-buffer kernel with {} sources and {} destinations", m.nsrc,
                        m.ndst);
    LOOM_RETURN_IF_ERROR(check_launch(s));
    kernels::cuda::MultiArgs a;
    for (int k = 0; k < m.nsrc; ++k) a.src[k] = m.src[static_cast<std::size_t>(k)];
    for (int k = 0; k < m.ndst; ++k) a.dst[k] = m.dst[static_cast<std::size_t>(k)];
    a.nsrc = m.nsrc;
    a.ndst = m.ndst;
    a.count = m.count;
    a.divide_by = m.divide_by;
    a.skip_word = m.skip_word;
    a.ticket = m.ticket;
    g_multi_launches.fetch_add(1, std::memory_order_relaxed);
    const DataType dtype = m.dtype;
    const RedOp op = m.op;
    stream(s).enqueue([=] { sim::reduce_multi(dtype, op, a, kSimSms); });
    return Status::ok();
  }

  Result<IpcHandle> ipc_handle(void* p) override {
    LOOM_ASSIGN_OR_RETURN(MemoryKind kind, pointer_kind(p));
    if (kind != MemoryKind::Device)
      return make_error(ErrorCode::InvalidArgument, "host-sim: {} is not device memory", p);
    if (ipc_refused(p))  // host_sim_refuse_ipc: as CUDA refuses a stream-ordered pool's memory
      return make_error(ErrorCode::InvalidUsage,
                        "host-sim: {} cannot be exported (host_sim_refuse_ipc)", p);
    IpcHandle h;
    const std::uint32_t pid = static_cast<std::uint32_t>(::getpid());
    const auto addr = reinterpret_cast<std::uintptr_t>(p);
    std::memcpy(h.bytes.data(), &kIpcMagic, 4);
    std::memcpy(h.bytes.data() + 4, &pid, 4);
    std::memcpy(h.bytes.data() + 8, &addr, sizeof addr);
    return h;
  }
  Result<void*> ipc_open(const IpcHandle& h) override {
    std::uint32_t magic = 0, pid = 0;
    std::uintptr_t addr = 0;
    std::memcpy(&magic, h.bytes.data(), 4);
    std::memcpy(&pid, h.bytes.data() + 4, 4);
    std::memcpy(&addr, h.bytes.data() + 8, sizeof addr);
    if (magic != kIpcMagic)
      return make_error(ErrorCode::InvalidArgument, "host-sim: not a host-sim IPC handle");
    if (pid != static_cast<std::uint32_t>(::getpid()))
      return make_error(ErrorCode::InvalidUsage,
                        "host-sim: IPC handle of process {} cannot be opened in process {} "
                        "(host-sim shares device memory between threads only)",
                        pid, ::getpid());
    // The handle carries the address itself (same process only).
    void* p = reinterpret_cast<void*>(addr);  // NOLINT(performance-no-int-to-ptr)
    LOOM_ASSIGN_OR_RETURN(MemoryKind kind, pointer_kind(p));
    if (kind != MemoryKind::Device)
      return make_error(ErrorCode::InvalidArgument, "host-sim: IPC handle of freed memory {}", p);
    g_ipc_opens.fetch_add(1, std::memory_order_relaxed);
    return p;
  }
  void ipc_close(void*) override { g_ipc_closes.fetch_add(1, std::memory_order_relaxed); }
  bool ipc_opens(bool same_process) const override { return same_process; }
  Result<bool> can_access_peer(int dev, int peer) override {
    if (dev < 0 || dev >= visible_count() || peer < 0 || peer >= visible_count())
      return make_error(ErrorCode::InvalidArgument, "host-sim: no device pair ({}, {})", dev, peer);
    return sim_peers(physical(dev), physical(peer));
  }
  Result<std::string> pci_bus_id(int dev) override {
    if (dev < 0 || dev >= visible_count())
      return make_error(ErrorCode::InvalidArgument, "host-sim: no device {}", dev);
    return sim_bus_id(physical(dev));
  }
  int device_of_bus_id(std::string_view bus_id) override {
    const int phys = sim_physical_of(bus_id);
    for (int d = 0; phys >= 0 && d < visible_count(); ++d)
      if (physical(d) == phys) return d;
    return -1;
  }
  std::string peer_link(std::string_view bus_id, std::string_view peer_bus_id,
                        std::string_view) override {
    return sim_peers(sim_physical_of(bus_id), sim_physical_of(peer_bus_id)) ? "nvlink (simulated)"
                                                                            : "pcie (simulated)";
  }
  Result<void*> host_register(void* p, std::size_t) override { return p; }
  void host_unregister(void*) override {}
  Status flush_remote_writes() override {
    g_flushes.fetch_add(1, std::memory_order_relaxed);
    return Status::ok();
  }

 private:
  struct Allocation {
    std::size_t bytes = 0;
    std::uint64_t id = 0;
    bool ipc_refused = false;
  };
  bool ipc_refused(const void* p) {
    std::lock_guard lk(mu_);
    const Allocation* a = find(p);
    return a != nullptr && a->ipc_refused;
  }
  // host_sim_reuse_addresses: the most recently freed block of `bytes`, or null.
  void* reused(std::size_t bytes) {
    std::lock_guard lk(mu_);
    auto& mine = stash_[std::this_thread::get_id()];
    for (auto it = mine.rbegin(); it != mine.rend(); ++it)
      if (it->first == bytes) {
        void* p = it->second;
        mine.erase(std::next(it).base());
        return p;
      }
    return nullptr;
  }
  bool pinned(const void* p) {
    std::lock_guard lk(mu_);
    const auto addr = reinterpret_cast<std::uintptr_t>(p);
    auto it = pinned_.upper_bound(addr);
    return it != pinned_.begin() && addr < std::prev(it)->first + std::prev(it)->second;
  }
  // The allocation holding `p` (mu_ held), or null.
  const Allocation* find(const void* p) const {
    const auto addr = reinterpret_cast<std::uintptr_t>(p);
    auto it = allocations_.upper_bound(addr);
    if (it == allocations_.begin()) return nullptr;
    --it;
    return addr < it->first + it->second.bytes ? &it->second : nullptr;
  }
  static std::size_t round_up(std::size_t bytes) { return (bytes + 255) & ~std::size_t{255}; }
  // As CUDA: a kernel launches on a stream of the calling thread's current device only.
  Status check_launch(Stream s) {
    if (s == nullptr || stream(s).device() == current_) return Status::ok();
    return make_error(ErrorCode::InvalidUsage,
                      "host-sim: kernel launched on a stream of device {} while device {} is "
                      "current on this thread",
                      stream(s).device(), current_);
  }
  SimStream& stream(Stream s) {
    if (s) return *static_cast<SimStream*>(s);
    std::call_once(default_once_, [&] { default_stream_ = std::make_unique<SimStream>(0); });
    return *default_stream_;
  }

  static thread_local int current_;
  std::mutex mu_;
  std::map<std::uintptr_t, Allocation> allocations_;  // by base address
  std::map<std::uintptr_t, std::size_t> pinned_;      // alloc_pinned blocks: base -> bytes
  // Freed blocks kept for reuse (host_sim_reuse_addresses), per thread: each rank gets its own
  // addresses back, as each process's caching allocator would. Freed when reuse ends.
  std::map<std::thread::id, std::vector<std::pair<std::size_t, void*>>> stash_;
  std::uint64_t next_id_ = 0;
  std::once_flag default_once_;
  std::unique_ptr<SimStream> default_stream_;
};

thread_local int HostSimDevice::current_ = 0;

}  // namespace

std::uint64_t host_sim_reduce_launches() {
  return g_reduce_launches.load(std::memory_order_relaxed);
}

void host_sim_set_capturing(Stream s, bool capturing) {
  static_cast<SimStream*>(s)->capturing.store(capturing);
}

std::uint64_t host_sim_sync_hazards() {
  return g_sync_hazards.load(std::memory_order_relaxed);
}

std::uint64_t host_sim_value_waits() {
  return g_value_waits.load(std::memory_order_relaxed);
}

std::uint64_t host_sim_remote_write_flushes() {
  return g_flushes.load(std::memory_order_relaxed);
}

void host_sim_set_visible_devices(std::vector<int> physical) {
  t_visible = std::move(physical);
}

std::uint64_t host_sim_multi_launches() {
  return g_multi_launches.load(std::memory_order_relaxed);
}

std::uint64_t host_sim_ipc_opens() {
  return g_ipc_opens.load(std::memory_order_relaxed);
}

std::uint64_t host_sim_ipc_closes() {
  return g_ipc_closes.load(std::memory_order_relaxed);
}

void host_sim_reuse_addresses(bool on) {
  g_reuse_addresses.store(on);
  if (!on) static_cast<HostSimDevice&>(host_sim()).drop_stash();
}

void host_sim_refuse_ipc(const void* p) {
  static_cast<HostSimDevice&>(host_sim()).refuse_ipc(p);
}

Device& host_sim() {
  static HostSimDevice dev;
  return dev;
}

}  // namespace loom::device

extern "C" void loom_testing_register_host_sim() {
  loom::device::register_runtime("host-sim", [] { return &loom::device::host_sim(); });
}

namespace {
// Registers host-sim when the program starts (see cmake/LoomTesting.cmake for why the linker
// keeps this object).
[[maybe_unused]] const bool g_host_sim_registered = (loom_testing_register_host_sim(), true);
}  // namespace
