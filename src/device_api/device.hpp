// The device seam: everything loom asks of a GPU runtime (memory, streams, events, IPC handles,
// peer probing, kernel launch) behind one small interface, and the registry of the runtimes a
// program has (device_by_name, by LOOM_DEVICE name). Two implementations:
//   * "cuda"     (cuda_device.cpp, only when built with LOOM_HAVE_CUDA): the CUDA runtime, in
//     the library, registered by it;
//   * "host-sim" (host_sim_device.cpp, declared in host_sim.hpp): device memory is host memory
//     tracked in a table, streams are in-order worker threads, events are counters, kernels run
//     the CUDA kernels' __host__ __device__ logic on an emulated grid. It lets CI run the whole
//     stream-ordered pipeline (staging, ordering, handle exchange, executor) without a GPU; it
//     shows the logic, not the hardware. It is part of the testing library loom_testing
//     (cmake/LoomTesting.cmake), not of libloom, and registers itself in programs linking it.
// Streams and events are opaque handles (cudaStream_t / cudaEvent_t for CUDA); nullptr is the
// device's default stream.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "collective/kinds.hpp"
#include "common/deadline.hpp"
#include "common/status.hpp"
#include "loom/types.hpp"

namespace loom::device {

using coll::MemoryKind;  // where a buffer lives (src/collective/kinds.hpp)

/// An exported device allocation (cudaIpcMemHandle_t is 64 bytes).
struct IpcHandle {
  std::array<std::uint8_t, 64> bytes{};
};

using Stream = void*;
using Event = void*;

/// A device allocation as the runtime sees it (cuMemGetAddressRange,
/// CU_POINTER_ATTRIBUTE_BUFFER_ID).
struct Allocation {
  void* base = nullptr;
  std::size_t bytes = 0;
  std::uint64_t id = 0;  // as allocation_id(); 0 when the runtime cannot tell
};

/// The most buffers one multi-buffer launch reads or writes (reduce_multi_async).
inline constexpr int kMaxMultiBuffers = 16;

/// One launch of the multi-buffer kernel (kernels/cuda/reduce_multi_logic.hpp): every dst[j]
/// gets src[0] OP src[1] OP ... OP src[nsrc-1] (in that order, rounded after each operation, as
/// nsrc - 1 reduce_async launches would give), divided by `divide_by` when positive (Avg, as
/// divide_async after them). One source is a copy. A destination may be exactly a source; other
/// overlaps are not allowed.
struct MultiReduce {
  DataType dtype = DataType::Uint8;
  RedOp op = RedOp::Sum;
  std::array<const void*, kMaxMultiBuffers> src{};
  int nsrc = 0;
  std::array<void*, kMaxMultiBuffers> dst{};
  int ndst = 0;
  std::size_t count = 0;  // elements
  int divide_by = 0;
  /// Abandoned calls: when the word at `skip_word` (pinned or registered host memory, which the
  /// host writes) holds a non-zero ticket at or before `ticket` (cyclically) as the launch runs,
  /// it does nothing. Null: never skipped.
  const std::uint32_t* skip_word = nullptr;
  std::uint32_t ticket = 0;
};
/// A host function enqueued on a stream (runs when the stream reaches it; must not call the
/// device runtime).
using HostFn = void (*)(void* arg);

class Device {
 public:
  virtual ~Device() = default;
  /// "cuda" or "host-sim".
  [[nodiscard]] virtual std::string_view name() const = 0;
  [[nodiscard]] virtual int device_count() const = 0;
  virtual Result<int> current_device() = 0;
  /// Makes `dev` the calling thread's current device (cudaSetDevice).
  virtual Status set_device(int dev) = 0;

  // Memory.
  /// Host or Device, as cudaPointerGetAttributes tells them apart (managed memory is Device).
  virtual Result<MemoryKind> pointer_kind(const void* p) = 0;
  virtual Result<void*> alloc(std::size_t bytes) = 0;  // device memory
  virtual void free(void* p) = 0;
  /// The process-wide unique id of the device allocation holding `p` (CUDA's
  /// CU_POINTER_ATTRIBUTE_BUFFER_ID): a buffer freed and reallocated at the same address gets a
  /// new one, so a registration cache never hands out a stale registration. 0 when the runtime
  /// cannot tell (then nothing may be cached for it).
  virtual std::uint64_t allocation_id(const void* p) = 0;
  /// The device allocation holding `p`: its base, size and id (InvalidArgument when `p` is not
  /// in device memory the runtime allocated).
  virtual Result<Allocation> allocation(const void* p) = 0;
  virtual Result<void*> alloc_pinned(std::size_t bytes) = 0;  // page-locked host memory
  virtual void free_pinned(void* p) = 0;

  // Streams and events.
  virtual Result<Stream> create_stream() = 0;
  virtual void destroy_stream(Stream s) = 0;
  /// Any direction (unified addressing), ordered on `s`.
  virtual Status copy_async(void* dst, const void* src, std::size_t bytes, Stream s) = 0;
  virtual Status launch_host_fn(Stream s, HostFn fn, void* arg) = 0;
  virtual Result<Event> create_event() = 0;
  virtual void destroy_event(Event e) = 0;
  virtual Status record(Event e, Stream s) = 0;
  /// Non-blocking: true once the work before the last record() has finished (or never recorded).
  virtual Result<bool> query(Event e) = 0;
  /// Blocks until `s` is idle or `deadline` passes (Timeout).
  virtual Status synchronize(Stream s, Deadline deadline) = 0;
  /// A stream memory operation (cuStreamWaitValue32): work queued on `s` after it waits until
  /// the 32-bit word `word` (in alloc_pinned memory, which the host writes) reaches `value`,
  /// cyclically ((int32_t)(*word - value) >= 0). No host thread waits meanwhile. InvalidUsage
  /// where the runtime or the device has no stream memory operations.
  virtual Status wait_value(Stream s, const std::uint32_t* word, std::uint32_t value) = 0;
  /// A stream memory operation (cuStreamWriteValue32): once `s` reaches it, and after every
  /// write of the work before it (a memory fence), the 32-bit word `word` (pinned or registered
  /// host memory) becomes `value`. InvalidUsage where the runtime or device has none.
  virtual Status write_value(Stream s, std::uint32_t* word, std::uint32_t value) = 0;
  /// Work queued on `s` after this waits for the work before the last record() of `e` (an event
  /// of this process; cudaStreamWaitEvent). No host thread waits.
  virtual Status wait_event(Stream s, Event e) = 0;
  /// Whether `s` is being captured into a CUDA graph (cudaStreamIsCapturing).
  virtual Result<bool> is_capturing(Stream s) = 0;

  // Kernels (kernels/cuda): dst = a OP b; x = x / n. Avg reduces as Sum.
  virtual Status reduce_async(DataType dtype, RedOp op, void* dst, const void* a, const void* b,
                              std::size_t count, Stream s) = 0;
  virtual Status divide_async(DataType dtype, void* x, std::size_t count, int n, Stream s) = 0;
  /// The multi-buffer kernel (MultiReduce), for the peer-read route: one launch reduces the
  /// ranks' inputs and writes every output. InvalidArgument for 0 or more than kMaxMultiBuffers
  /// sources or destinations.
  virtual Status reduce_multi_async(const MultiReduce& m, Stream s) = 0;

  // IPC and peers.
  virtual Result<IpcHandle> ipc_handle(void* device_ptr) = 0;
  virtual Result<void*> ipc_open(const IpcHandle& h) = 0;
  virtual void ipc_close(void* mapped) = 0;
  /// Whether ipc_open() accepts a handle exported by this process (`same_process`) or by
  /// another process on the host. CUDA: only another process (cudaIpcOpenMemHandle refuses the
  /// exporter's own handles); host-sim: only this one (ranks as threads).
  [[nodiscard]] virtual bool ipc_opens(bool same_process) const = 0;
  /// cudaDeviceCanAccessPeer(dev, peer).
  virtual Result<bool> can_access_peer(int dev, int peer) = 0;
  /// The PCI address of device `dev` in canonical form ("0000:3b:00.0", see nvlink.hpp): it
  /// names a GPU alike in every process of a host, whatever each one's CUDA_VISIBLE_DEVICES,
  /// where ordinals do not.
  virtual Result<std::string> pci_bus_id(int dev) = 0;
  /// This process's ordinal for the GPU at `bus_id`, or -1 when it is not visible here.
  virtual int device_of_bus_id(std::string_view bus_id) = 0;
  /// What joins the GPUs at two PCI addresses, for the logs: "nvlink x<N>", "nvlink
  /// (nvswitch)", "pcie", or "unknown (<why>)" when NVML (loaded from `nvml_library`) cannot
  /// tell.
  virtual std::string peer_link(std::string_view bus_id, std::string_view peer_bus_id,
                                std::string_view nvml_library) = 0;
  /// Makes host memory this process did not allocate (a shared-memory segment) usable by device
  /// copies and kernels (cudaHostRegister, mapped); returns the address kernels use.
  virtual Result<void*> host_register(void* p, std::size_t bytes) = 0;
  virtual void host_unregister(void* p) = 0;

  // Network (GPUDirect RDMA).
  /// Makes the writes a NIC has made into this device's memory visible to work queued after
  /// this call (cudaDeviceFlushGPUDirectRDMAWrites); called after a network receive into device
  /// memory completes, before a kernel reads it.
  virtual Status flush_remote_writes() = 0;
};

/// A device runtime's entry in the registry: returns the process-wide runtime, or nullptr when
/// it has no device here (CUDA without a visible GPU). A device runtime is process-wide by
/// nature, like CUDA's own context.
using RuntimeFactory = Device* (*)();

/// Adds the runtime `name` to those device_by_name() finds (a second registration of a name
/// replaces the first). Thread-safe; may run during static initialization. The registry holds
/// "cuda" from the start when loom is built with CUDA; the testing library adds "host-sim".
void register_runtime(std::string_view name, RuntimeFactory factory);

/// The process-wide device runtime by LOOM_DEVICE name: a registered one ("cuda", "host-sim"),
/// "auto" (cuda when registered and a GPU is visible, else nullptr) or "none" (nullptr).
/// InvalidUsage for "cuda" without CUDA, "host-sim" in a program that does not link
/// loom_testing, and names no runtime has.
Result<Device*> device_by_name(std::string_view name);

#if defined(LOOM_HAVE_CUDA)
/// The CUDA runtime (nullptr when no GPU is visible).
Device* cuda_device();
#endif

}  // namespace loom::device
