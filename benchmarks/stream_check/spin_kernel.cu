// See producer.hpp.
#include <cuda_runtime.h>

#include "benchmarks/stream_check/producer.hpp"

namespace {

__device__ std::uint64_t global_ns() {
  std::uint64_t t = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin_then_write(std::int32_t* data, std::size_t n, std::int32_t base,
                                std::uint64_t ns) {
  const std::uint64_t until = global_ns() + ns;
  while (global_ns() < until) __nanosleep(10000);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride)
    data[i] = base + static_cast<std::int32_t>(i % 1000);
}

}  // namespace

extern "C" int loom_stream_check_spin(void* stream, std::int32_t* data, std::size_t n,
                                      std::int32_t base, std::uint64_t ns) {
  spin_then_write<<<8, 256, 0, static_cast<cudaStream_t>(stream)>>>(data, n, base, ns);
  return static_cast<int>(cudaGetLastError());
}
