// loom-ipc-probe: how fast one process reads another's GPU memory through CUDA IPC on the same
// device, without loom (docs/gpu.md, "Two ranks on one GPU"). First light measured loom's
// device allreduce between two processes sharing one H200 at ~1.2 GB/s whatever the FIFO slot
// size, while one process moves 1.2 TB/s: this tells whether the IPC mapping itself, or what
// the other process's context does meanwhile, costs that.
//
//   loom-ipc-probe [--max BYTES]   (default 256 MiB; sizes 1 MiB, 16 MiB and --max)
//
// The program forks before any CUDA call: the parent (A) exports a buffer (cudaIpcGetMemHandle)
// through a pipe; the child (B) opens it and times, on its own non-blocking stream with CUDA
// events, copies into its own buffer: cudaMemcpyAsync and a copy kernel, from its own memory
// (the baseline) and from A's. Each while A (idle) waits on the pipe, (legacy-held) holds the
// legacy default stream with a host function, as loom's stream gate does on torch's default
// stream, (stream-held) holds a stream of its own likewise, (value-held) holds a stream of its
// own with a stream memory operation (cuStreamWaitValue32, as LOOM_STREAM_GATE=wait-value
// does), (busy) runs a kernel that spins until told to stop. GB/s: bytes copied per second. Every copy's first and last bytes are
// checked. Exit status: 0 measured; 1 a CUDA error or a wrong byte.
#include <cuda.h>  // driver API types only: cuStreamWaitValue32 comes through the runtime
#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

namespace {

#define CHECK_CUDA(call)                                                            \
  do {                                                                              \
    cudaError_t err_ = (call);                                                      \
    if (err_ != cudaSuccess) {                                                      \
      std::fprintf(stderr, "ipc-probe: %s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
                   cudaGetErrorString(err_));                                       \
      std::exit(1);                                                                 \
    }                                                                               \
  } while (0)

__global__ void copy_kernel(uint4* dst, const uint4* src, std::size_t n) {
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * blockDim.x)
    dst[i] = src[i];
}

// Spins until *stop (mapped host memory) is set: keeps A's context busy on the GPU.
__global__ void spin_kernel(const volatile int* stop) {
  while (*stop == 0) __nanosleep(1000);
}

// Moves all n bytes through the pipe `fd` (write or read); the other process's end closing first
// ends this one too.
template <typename Io, typename Ptr>
void transfer_all(Io io, int fd, Ptr p, std::size_t n) {
  auto* c = reinterpret_cast<
      std::conditional_t<std::is_const_v<std::remove_pointer_t<Ptr>>, const char*, char*>>(p);
  while (n > 0) {
    const ssize_t done = io(fd, c, n);
    if (done <= 0) {
      std::fprintf(stderr, "ipc-probe: the other process ended early\n");
      std::exit(1);
    }
    c += done;
    n -= static_cast<std::size_t>(done);
  }
}
void write_all(int fd, const void* p, std::size_t n) {
  transfer_all(::write, fd, p, n);
}
void read_all(int fd, void* p, std::size_t n) {
  transfer_all(::read, fd, p, n);
}

constexpr unsigned char kFillA = 0x5a;
constexpr unsigned char kFillB = 0x3c;
const char* const kScenarios[] = {"idle", "legacy-held", "stream-held", "value-held", "busy"};

// cuStreamWaitValue32 through the runtime's driver entry point (no libcuda link).
using WaitValueFn = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
WaitValueFn wait_value_fn() {
  void* f = nullptr;
  cudaDriverEntryPointQueryResult found{};
#if CUDART_VERSION >= 12050
  CHECK_CUDA(
      cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &f, 11070, cudaEnableDefault, &found));
#else
  CHECK_CUDA(cudaGetDriverEntryPoint("cuStreamWaitValue32", &f, cudaEnableDefault, &found));
#endif
  if (found != cudaDriverEntryPointSuccess || f == nullptr) {
    std::fprintf(stderr, "ipc-probe: no cuStreamWaitValue32 in this driver\n");
    std::exit(1);
  }
  return reinterpret_cast<WaitValueFn>(f);
}

// ---- A: exports its buffer, then does what each scenario says until B says "next".
std::atomic<int> g_release{0};
void CUDART_CB hold(void*) {
  while (g_release.load() == 0) usleep(50);
}

int run_a(int to_b, int from_b, std::size_t max) {
  CHECK_CUDA(cudaSetDevice(0));
  void* buf = nullptr;
  CHECK_CUDA(cudaMalloc(&buf, max));
  CHECK_CUDA(cudaMemset(buf, kFillA, max));
  CHECK_CUDA(cudaDeviceSynchronize());
  cudaIpcMemHandle_t h;
  CHECK_CUDA(cudaIpcGetMemHandle(&h, buf));
  write_all(to_b, &h, sizeof h);
  int* stop = nullptr;
  CHECK_CUDA(cudaHostAlloc(&stop, sizeof(int), cudaHostAllocMapped));
  cudaStream_t own;
  CHECK_CUDA(cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking));
  for (const char* sc : kScenarios) {
    const std::string s = sc;
    g_release = 0;
    *stop = 0;
    if (s == "legacy-held") CHECK_CUDA(cudaLaunchHostFunc(cudaStreamLegacy, hold, nullptr));
    if (s == "stream-held") CHECK_CUDA(cudaLaunchHostFunc(own, hold, nullptr));
    if (s == "value-held") {  // the stream waits until *stop reaches 1 (set at release)
      void* dp = nullptr;
      CHECK_CUDA(cudaHostGetDevicePointer(&dp, stop, 0));
      if (wait_value_fn()(own, reinterpret_cast<CUdeviceptr>(dp), 1, CU_STREAM_WAIT_VALUE_GEQ) !=
          CUDA_SUCCESS) {
        std::fprintf(stderr, "ipc-probe: cuStreamWaitValue32 failed\n");
        return 1;
      }
    }
    if (s == "busy") spin_kernel<<<1, 1, 0, own>>>(stop);
    CHECK_CUDA(cudaGetLastError());
    char go = 1;
    write_all(to_b, &go, 1);  // B measures now
    char done = 0;
    read_all(from_b, &done, 1);
    g_release = 1;
    *stop = 1;
    CHECK_CUDA(cudaDeviceSynchronize());
  }
  char bye = 0;
  read_all(from_b, &bye, 1);  // B has closed the mapping
  CHECK_CUDA(cudaFree(buf));
  return 0;
}

// ---- B: times the copies.
struct Timer {
  cudaEvent_t a, b;
  Timer() {
    CHECK_CUDA(cudaEventCreate(&a));
    CHECK_CUDA(cudaEventCreate(&b));
  }
};

bool check(const void* dev, std::size_t n, unsigned char want) {
  unsigned char first = 0, last = 0;
  CHECK_CUDA(cudaMemcpy(&first, dev, 1, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(&last, static_cast<const char*>(dev) + n - 1, 1, cudaMemcpyDeviceToHost));
  return first == want && last == want;
}

// Median microseconds of `reps` copies of n bytes from src to dst on s.
float time_copy(bool kernel, void* dst, const void* src, std::size_t n, cudaStream_t s, Timer& t) {
  const int reps = 7;
  std::vector<float> us;
  for (int i = 0; i < reps + 1; ++i) {  // the first is a warm-up
    CHECK_CUDA(cudaEventRecord(t.a, s));
    if (kernel) {
      const std::size_t words = n / sizeof(uint4);
      copy_kernel<<<132 * 8, 512, 0, s>>>(static_cast<uint4*>(dst), static_cast<const uint4*>(src),
                                          words);
      CHECK_CUDA(cudaGetLastError());
    } else {
      CHECK_CUDA(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, s));
    }
    CHECK_CUDA(cudaEventRecord(t.b, s));
    CHECK_CUDA(cudaEventSynchronize(t.b));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, t.a, t.b));
    if (i > 0) us.push_back(ms * 1000.0f);
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

int run_b(int from_a, int to_a, std::size_t max) {
  CHECK_CUDA(cudaSetDevice(0));
  cudaIpcMemHandle_t h;
  read_all(from_a, &h, sizeof h);
  void* peer = nullptr;
  CHECK_CUDA(cudaIpcOpenMemHandle(&peer, h, cudaIpcMemLazyEnablePeerAccess));
  void *mine = nullptr, *dst = nullptr;
  CHECK_CUDA(cudaMalloc(&mine, max));
  CHECK_CUDA(cudaMalloc(&dst, max));
  CHECK_CUDA(cudaMemset(mine, kFillB, max));
  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  Timer t;
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("# loom-ipc-probe: %s, two processes on device 0; GB/s = bytes copied per second\n",
              prop.name);
  std::printf("%-12s %-8s %-6s %12s %10s %10s  %s\n", "# A is", "method", "from", "bytes",
              "time(us)", "GB/s", "check");
  int wrong = 0;
  const std::size_t sizes[] = {std::size_t{1} << 20, std::size_t{16} << 20, max};
  for (const char* sc : kScenarios) {
    char go = 0;
    read_all(from_a, &go, 1);
    for (bool kernel : {false, true}) {
      for (bool from_peer : {false, true}) {
        for (std::size_t n : sizes) {
          CHECK_CUDA(cudaMemsetAsync(dst, 0, n, s));
          const float us = time_copy(kernel, dst, from_peer ? peer : mine, n, s, t);
          const bool ok = check(dst, n, from_peer ? kFillA : kFillB);
          wrong += ok ? 0 : 1;
          std::printf("%-12s %-8s %-6s %12zu %10.1f %10.1f  %s\n", sc, kernel ? "kernel" : "memcpy",
                      from_peer ? "A" : "own", n, us, static_cast<double>(n) / us / 1e3,
                      ok ? "ok" : "WRONG");
        }
      }
    }
    std::fflush(stdout);
    char done = 1;
    write_all(to_a, &done, 1);
  }
  CHECK_CUDA(cudaIpcCloseMemHandle(peer));
  char bye = 0;
  write_all(to_a, &bye, 1);
  return wrong == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t max = std::size_t{256} << 20;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--max") == 0 && i + 1 < argc) {
      max = std::strtoull(argv[++i], nullptr, 10);
    } else {
      std::fprintf(stderr, "usage: loom-ipc-probe [--max BYTES]\n");
      return 2;
    }
  }
  max = std::max<std::size_t>(max / 16 * 16, std::size_t{16} << 20);
  std::signal(SIGPIPE, SIG_IGN);  // a write to a process that ended fails (EPIPE) instead
  int ab[2], ba[2];
  if (pipe(ab) != 0 || pipe(ba) != 0) return 1;
  const pid_t child = fork();  // before any CUDA call
  if (child < 0) return 1;
  if (child == 0) {  // each side closes the ends it does not use: a peer's death is then EOF
    ::close(ab[1]);
    ::close(ba[0]);
    return run_b(ab[0], ba[1], max);
  }
  ::close(ab[0]);
  ::close(ba[1]);
  const int rc_a = run_a(ab[1], ba[0], max);
  int status = 0;
  waitpid(child, &status, 0);
  const int rc_b = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  return rc_a != 0 ? rc_a : rc_b;
}
