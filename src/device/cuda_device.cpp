// The CUDA implementation of the device seam: a thin mapping onto the CUDA runtime, plus the
// kernels of kernels/cuda. Plain C++ (no nvcc): only kernels/cuda/*.cu go through nvcc.
#if defined(LOOM_HAVE_CUDA)

#include <cuda.h>  // driver API types only: its functions are reached through the runtime
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "device/device.hpp"
#include "device/nvlink.hpp"
#include "kernels/cuda/reduce_cuda.hpp"

namespace loom::device {
namespace {

Status cuda_status(cudaError_t err, std::string_view what) {
  if (err == cudaSuccess) return Status::ok();
  return make_error(ErrorCode::SystemError, "CUDA {} failed: {} ({})", what,
                    cudaGetErrorString(err), cudaGetErrorName(err));
}

// A driver API function through the runtime's driver entry point (linking libcuda would make
// the library unloadable on hosts without a driver); null when the driver lacks it.
void* driver_entry(const char* name, int version) {
  void* f = nullptr;
  cudaDriverEntryPointQueryResult found{};
#if CUDART_VERSION >= 12050
  cudaError_t err = cudaGetDriverEntryPointByVersion(name, &f, version, cudaEnableDefault, &found);
#else
  (void)version;
  cudaError_t err = cudaGetDriverEntryPoint(name, &f, cudaEnableDefault, &found);
#endif
  if (err != cudaSuccess || found != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return f;
}

PFN_cuPointerGetAttribute_v4000 pointer_get_attribute() {
  static const auto fn = reinterpret_cast<PFN_cuPointerGetAttribute_v4000>(
      driver_entry("cuPointerGetAttribute", 12000));
  return fn;
}

// cuStreamWaitValue32 (v2: the stream memory operations every CUDA 12 device has).
PFN_cuStreamWaitValue32_v11070 stream_wait_value() {
  static const auto fn =
      reinterpret_cast<PFN_cuStreamWaitValue32_v11070>(driver_entry("cuStreamWaitValue32", 11070));
  return fn;
}

// cuStreamWriteValue32 (v2, as cuStreamWaitValue32).
PFN_cuStreamWriteValue32_v11070 stream_write_value() {
  static const auto fn = reinterpret_cast<PFN_cuStreamWriteValue32_v11070>(
      driver_entry("cuStreamWriteValue32", 11070));
  return fn;
}

PFN_cuMemGetAddressRange_v3020 mem_get_address_range() {
  static const auto fn =
      reinterpret_cast<PFN_cuMemGetAddressRange_v3020>(driver_entry("cuMemGetAddressRange", 3020));
  return fn;
}

Status driver_status(CUresult r, std::string_view what) {
  if (r == CUDA_SUCCESS) return Status::ok();
  return make_error(
      r == CUDA_ERROR_NOT_SUPPORTED ? ErrorCode::InvalidUsage : ErrorCode::SystemError,
      "CUDA {} failed (CUresult {}{})", what, static_cast<int>(r),
      r == CUDA_ERROR_NOT_SUPPORTED ? ": not supported by this device" : "");
}

// The device address of pinned or registered host memory (stream memory operations and kernels
// take it; with unified addressing it is often the host address itself).
Result<void*> mapped(const void* host) {
  void* dp = nullptr;
  LOOM_RETURN_IF_ERROR(cuda_status(cudaHostGetDevicePointer(&dp, const_cast<void*>(host), 0),
                                   "cudaHostGetDevicePointer"));
  return dp;
}

static_assert(kMaxMultiBuffers == kernels::cuda::kMaxMultiPointers);

class CudaDevice final : public Device {
 public:
  explicit CudaDevice(int count) : count_(count) {}

  std::string_view name() const override { return "cuda"; }
  int device_count() const override { return count_; }
  Result<int> current_device() override {
    int dev = 0;
    LOOM_RETURN_IF_ERROR(cuda_status(cudaGetDevice(&dev), "cudaGetDevice"));
    return dev;
  }

  Status set_device(int dev) override { return cuda_status(cudaSetDevice(dev), "cudaSetDevice"); }

  Result<MemoryKind> pointer_kind(const void* p) override {
    cudaPointerAttributes attr{};
    cudaError_t err = cudaPointerGetAttributes(&attr, p);
    if (err == cudaErrorInvalidValue) {  // unregistered host memory on old drivers
      (void)cudaGetLastError();
      return MemoryKind::Host;
    }
    LOOM_RETURN_IF_ERROR(cuda_status(err, "cudaPointerGetAttributes"));
    return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged
               ? MemoryKind::Device
               : MemoryKind::Host;
  }
  Result<void*> alloc(std::size_t bytes) override {
    void* p = nullptr;
    LOOM_RETURN_IF_ERROR(cuda_status(cudaMalloc(&p, bytes), "cudaMalloc"));
    return p;
  }
  void free(void* p) override { (void)cudaFree(p); }
  std::uint64_t allocation_id(const void* p) override {
    PFN_cuPointerGetAttribute_v4000 get = pointer_get_attribute();
    unsigned long long id = 0;
    if (get == nullptr ||
        get(&id, CU_POINTER_ATTRIBUTE_BUFFER_ID, reinterpret_cast<CUdeviceptr>(p)) != CUDA_SUCCESS)
      return 0;
    return id;
  }
  Result<Allocation> allocation(const void* p) override {
    PFN_cuMemGetAddressRange_v3020 range = mem_get_address_range();
    if (range == nullptr)
      return make_error(ErrorCode::InvalidUsage, "the CUDA driver has no cuMemGetAddressRange");
    CUdeviceptr base = 0;
    std::size_t bytes = 0;
    const CUresult r = range(&base, &bytes, reinterpret_cast<CUdeviceptr>(p));
    if (r != CUDA_SUCCESS)
      return make_error(ErrorCode::InvalidArgument,
                        "{} is not in a device allocation (cuMemGetAddressRange: CUresult {})", p,
                        static_cast<int>(r));
    Allocation a;
    a.base = reinterpret_cast<void*>(base);  // NOLINT(performance-no-int-to-ptr)
    a.bytes = bytes;
    a.id = allocation_id(p);
    return a;
  }
  Result<void*> alloc_pinned(std::size_t bytes) override {
    void* p = nullptr;
    LOOM_RETURN_IF_ERROR(cuda_status(
        cudaHostAlloc(&p, bytes, cudaHostAllocPortable | cudaHostAllocMapped), "cudaHostAlloc"));
    return p;
  }
  void free_pinned(void* p) override { (void)cudaFreeHost(p); }

  Result<Stream> create_stream() override {
    LOOM_RETURN_IF_ERROR(load_kernels());
    cudaStream_t s = nullptr;
    LOOM_RETURN_IF_ERROR(cuda_status(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking),
                                     "cudaStreamCreateWithFlags"));
    return static_cast<Stream>(s);
  }
  void destroy_stream(Stream s) override { (void)cudaStreamDestroy(as_stream(s)); }
  Status copy_async(void* dst, const void* src, std::size_t bytes, Stream s) override {
    if (bytes == 0) return Status::ok();
    return cuda_status(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, as_stream(s)),
                       "cudaMemcpyAsync");
  }
  Status launch_host_fn(Stream s, HostFn fn, void* arg) override {
    return cuda_status(cudaLaunchHostFunc(as_stream(s), fn, arg), "cudaLaunchHostFunc");
  }
  Result<Event> create_event() override {
    cudaEvent_t e = nullptr;
    LOOM_RETURN_IF_ERROR(cuda_status(cudaEventCreateWithFlags(&e, cudaEventDisableTiming),
                                     "cudaEventCreateWithFlags"));
    return static_cast<Event>(e);
  }
  void destroy_event(Event e) override { (void)cudaEventDestroy(static_cast<cudaEvent_t>(e)); }
  Status record(Event e, Stream s) override {
    return cuda_status(cudaEventRecord(static_cast<cudaEvent_t>(e), as_stream(s)),
                       "cudaEventRecord");
  }
  Result<bool> query(Event e) override {
    cudaError_t err = cudaEventQuery(static_cast<cudaEvent_t>(e));
    if (err == cudaErrorNotReady) return false;
    LOOM_RETURN_IF_ERROR(cuda_status(err, "cudaEventQuery"));
    return true;
  }
  Status synchronize(Stream s, Deadline deadline) override {
    // cudaStreamSynchronize has no deadline: poll the stream instead, napping in between.
    const auto start = Clock::now();
    for (;;) {
      cudaError_t err = cudaStreamQuery(as_stream(s));
      if (err == cudaSuccess) return Status::ok();
      if (err != cudaErrorNotReady) return cuda_status(err, "cudaStreamQuery");
      if (deadline.expired())
        return make_error(ErrorCode::Timeout, "CUDA stream {} still busy at its deadline", s);
      std::this_thread::sleep_for(backoff_nap(Clock::now() - start));
    }
  }

  Status wait_value(Stream s, const std::uint32_t* word, std::uint32_t value) override {
    PFN_cuStreamWaitValue32_v11070 wait = stream_wait_value();
    if (wait == nullptr)
      return make_error(ErrorCode::InvalidUsage,
                        "the CUDA driver has no cuStreamWaitValue32 (stream memory operations)");
    void* dp = nullptr;
    LOOM_RETURN_IF_ERROR(
        cuda_status(cudaHostGetDevicePointer(&dp, const_cast<std::uint32_t*>(word), 0),
                    "cudaHostGetDevicePointer"));
    const CUresult r = wait(static_cast<CUstream>(s), reinterpret_cast<CUdeviceptr>(dp), value,
                            CU_STREAM_WAIT_VALUE_GEQ);
    if (r == CUDA_SUCCESS) return Status::ok();
    return make_error(
        r == CUDA_ERROR_NOT_SUPPORTED ? ErrorCode::InvalidUsage : ErrorCode::SystemError,
        "CUDA cuStreamWaitValue32 failed (CUresult {}{})", static_cast<int>(r),
        r == CUDA_ERROR_NOT_SUPPORTED ? ": not supported by this device" : "");
  }

  Status write_value(Stream s, std::uint32_t* word, std::uint32_t value) override {
    PFN_cuStreamWriteValue32_v11070 write = stream_write_value();
    if (write == nullptr)
      return make_error(ErrorCode::InvalidUsage,
                        "the CUDA driver has no cuStreamWriteValue32 (stream memory operations)");
    LOOM_ASSIGN_OR_RETURN(void* dp, mapped(word));
    return driver_status(write(static_cast<CUstream>(s), reinterpret_cast<CUdeviceptr>(dp), value,
                               CU_STREAM_WRITE_VALUE_DEFAULT),
                         "cuStreamWriteValue32");
  }
  Status wait_event(Stream s, Event e) override {
    return cuda_status(cudaStreamWaitEvent(as_stream(s), static_cast<cudaEvent_t>(e), 0),
                       "cudaStreamWaitEvent");
  }

  Result<bool> is_capturing(Stream s) override {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    LOOM_RETURN_IF_ERROR(
        cuda_status(cudaStreamIsCapturing(as_stream(s), &status), "cudaStreamIsCapturing"));
    return status != cudaStreamCaptureStatusNone;
  }

  Status reduce_async(DataType dtype, RedOp op, void* dst, const void* a, const void* b,
                      std::size_t count, Stream s) override {
    LOOM_ASSIGN_OR_RETURN(int sms, sm_count());
    return cuda_status(
        static_cast<cudaError_t>(kernels::cuda::reduce_async(dtype, op, dst, a, b, count, sms, s)),
        "reduction kernel launch");
  }
  Status divide_async(DataType dtype, void* x, std::size_t count, int n, Stream s) override {
    LOOM_ASSIGN_OR_RETURN(int sms, sm_count());
    return cuda_status(
        static_cast<cudaError_t>(kernels::cuda::divide_async(dtype, x, count, n, sms, s)),
        "average kernel launch");
  }

  Status reduce_multi_async(const MultiReduce& m, Stream s) override {
    kernels::cuda::MultiArgs a;
    if (m.nsrc < 1 || m.nsrc > kMaxMultiBuffers || m.ndst < 1 || m.ndst > kMaxMultiBuffers)
      return make_error(ErrorCode::InvalidArgument,
                        "multi-buffer kernel: {} sources and {} destinations (1..{} each)", m.nsrc,
                        m.ndst, kMaxMultiBuffers);
    for (int k = 0; k < m.nsrc; ++k) a.src[k] = m.src[static_cast<std::size_t>(k)];
    for (int k = 0; k < m.ndst; ++k) a.dst[k] = m.dst[static_cast<std::size_t>(k)];
    a.nsrc = m.nsrc;
    a.ndst = m.ndst;
    a.count = m.count;
    a.divide_by = m.divide_by;
    a.ticket = m.ticket;
    if (m.skip_word != nullptr) {
      LOOM_ASSIGN_OR_RETURN(void* dp, mapped(m.skip_word));
      a.skip_word = static_cast<const volatile std::uint32_t*>(dp);
    }
    LOOM_ASSIGN_OR_RETURN(int sms, sm_count());
    return cuda_status(
        static_cast<cudaError_t>(kernels::cuda::reduce_multi_async(m.dtype, m.op, a, sms, s)),
        "multi-buffer kernel launch");
  }

  Result<IpcHandle> ipc_handle(void* p) override {
    cudaIpcMemHandle_t h{};
    LOOM_RETURN_IF_ERROR(cuda_status(cudaIpcGetMemHandle(&h, p), "cudaIpcGetMemHandle"));
    static_assert(sizeof h == sizeof(IpcHandle::bytes));
    IpcHandle out;
    std::memcpy(out.bytes.data(), &h, sizeof h);
    return out;
  }
  Result<void*> ipc_open(const IpcHandle& in) override {
    cudaIpcMemHandle_t h{};
    std::memcpy(&h, in.bytes.data(), sizeof h);
    void* p = nullptr;
    LOOM_RETURN_IF_ERROR(cuda_status(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess),
                                     "cudaIpcOpenMemHandle"));
    return p;
  }
  void ipc_close(void* p) override { (void)cudaIpcCloseMemHandle(p); }
  bool ipc_opens(bool same_process) const override { return !same_process; }
  Result<bool> can_access_peer(int dev, int peer) override {
    int ok = 0;
    LOOM_RETURN_IF_ERROR(
        cuda_status(cudaDeviceCanAccessPeer(&ok, dev, peer), "cudaDeviceCanAccessPeer"));
    return ok != 0;
  }
  Result<std::string> pci_bus_id(int dev) override {
    char id[32] = {};
    LOOM_RETURN_IF_ERROR(
        cuda_status(cudaDeviceGetPCIBusId(id, sizeof id, dev), "cudaDeviceGetPCIBusId"));
    return canonical_bus_id(id);
  }
  int device_of_bus_id(std::string_view bus_id) override {
    const std::string id(bus_id);
    int dev = -1;
    if (cudaDeviceGetByPCIBusId(&dev, id.c_str()) != cudaSuccess) {
      (void)cudaGetLastError();  // not visible to this process
      return -1;
    }
    return dev;
  }
  // NVML's NVLink table (device/nvlink.hpp); PCI addresses work whatever is visible.
  std::string peer_link(std::string_view bus_id, std::string_view peer_bus_id,
                        std::string_view nvml_library) override {
    auto mine = nvml_links(nvml_library, bus_id);
    auto theirs = mine.is_ok() ? nvml_links(nvml_library, peer_bus_id) : mine;
    if (!theirs.is_ok()) return fmt::format("unknown ({})", theirs.status().message());
    return classify_link(*mine, peer_bus_id, *theirs);
  }
  Result<void*> host_register(void* p, std::size_t bytes) override {
    LOOM_RETURN_IF_ERROR(
        cuda_status(cudaHostRegister(p, bytes, cudaHostRegisterPortable | cudaHostRegisterMapped),
                    "cudaHostRegister"));
    void* dp = nullptr;
    Status st = cuda_status(cudaHostGetDevicePointer(&dp, p, 0), "cudaHostGetDevicePointer");
    if (!st.is_ok()) {
      (void)cudaHostUnregister(p);
      return st;
    }
    return dp;
  }
  void host_unregister(void* p) override { (void)cudaHostUnregister(p); }
  Status flush_remote_writes() override {
    cudaError_t err = cudaDeviceFlushGPUDirectRDMAWrites(
        cudaFlushGPUDirectRDMAWritesTargetCurrentDevice, cudaFlushGPUDirectRDMAWritesToOwner);
    if (err == cudaErrorNotSupported) {  // the device orders remote writes without a flush
      (void)cudaGetLastError();
      return Status::ok();
    }
    return cuda_status(err, "cudaDeviceFlushGPUDirectRDMAWrites");
  }

 private:
  static cudaStream_t as_stream(Stream s) { return static_cast<cudaStream_t>(s); }
  // Every stream loom uses is created before its first collective: load the kernels onto the
  // current device then, once (kernels::cuda::load_kernels says why a lazy load could hang).
  Status load_kernels() {
    LOOM_ASSIGN_OR_RETURN(int dev, current_device());
    std::lock_guard lk(loaded_mu_);
    if (loaded_.empty()) loaded_.assign(static_cast<std::size_t>(count_), false);
    if (dev < 0 || dev >= count_ || loaded_[static_cast<std::size_t>(dev)]) return Status::ok();
    LOOM_RETURN_IF_ERROR(cuda_status(static_cast<cudaError_t>(kernels::cuda::load_kernels()),
                                     "loading the reduction kernels"));
    loaded_[static_cast<std::size_t>(dev)] = true;
    return Status::ok();
  }
  Result<int> sm_count() {
    LOOM_ASSIGN_OR_RETURN(int dev, current_device());
    int sms = 0;
    LOOM_RETURN_IF_ERROR(
        cuda_status(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev),
                    "cudaDeviceGetAttribute"));
    return sms;
  }

  int count_;
  std::mutex loaded_mu_;
  std::vector<bool> loaded_;  // per device: its kernels are loaded
};

}  // namespace

Device* cuda_device() {
  static CudaDevice* dev = []() -> CudaDevice* {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
      (void)cudaGetLastError();
      return nullptr;
    }
    return new CudaDevice(count);  // lives as long as the process, like the CUDA context
  }();
  return dev;
}

}  // namespace loom::device

#endif  // LOOM_HAVE_CUDA
