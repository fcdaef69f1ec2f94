// The multi-buffer kernel of the peer-read route: a thin __global__ wrapper around
// reduce_multi_thread (reduce_multi_logic.hpp) with CUB's streaming 16-byte loads and stores, one
// instantiation per (dtype x op) that loom::supports() (bitwise ops: integer types only), reached
// through the switch of reduce_multi_async; load_multi_kernels lists every one of them, so that
// none is loaded lazily behind a held stream (reduce_cuda.hpp, load_kernels).
#include <cuda_runtime.h>

#include <cub/thread/thread_load.cuh>
#include <cub/thread/thread_store.cuh>

#include "kernels/cuda/reduce_cuda.hpp"
#include "kernels/cuda/reduce_multi_logic.hpp"

namespace loom::kernels::cuda {
namespace {

/// 16-byte vectors through CUB's cache-streaming loads and stores (data is touched once).
struct StreamingMemory {
  template <typename S>
  __device__ static Pack<S> load(const S* p) noexcept {
    const uint4 raw = cub::ThreadLoad<cub::LOAD_CS>(reinterpret_cast<const uint4*>(p));
    Pack<S> v;
    memcpy(&v, &raw, sizeof v);
    return v;
  }
  template <typename S>
  __device__ static void store(S* p, const Pack<S>& v) noexcept {
    uint4 raw;
    memcpy(&raw, &v, sizeof raw);
    cub::ThreadStore<cub::STORE_CS>(reinterpret_cast<uint4*>(p), raw);
  }
};

constexpr unsigned kThreads = 256;

template <typename E, typename Op>
__global__ void __launch_bounds__(kThreads) reduce_multi_kernel(MultiArgs a, Split s) {
  __shared__ int skipped;
  if (threadIdx.x == 0) skipped = multi_skipped(a) ? 1 : 0;  // one read of host memory a block
  __syncthreads();
  if (skipped != 0) return;
  reduce_multi_thread<E, Op, StreamingMemory>(a, s,
                                              blockIdx.x * std::size_t{blockDim.x} + threadIdx.x,
                                              std::size_t{gridDim.x} * blockDim.x);
}

template <typename E, typename Op>
cudaError_t launch(const MultiArgs& a, int sms, cudaStream_t stream) {
  const Split s = split_multi(a, sizeof(typename E::S));
  const GridShape g = grid_for(work_items(s), sms, kThreads);
  reduce_multi_kernel<E, Op><<<g.blocks, g.threads, 0, stream>>>(a, s);
  return cudaGetLastError();
}

template <typename E>
cudaError_t launch_op(RedOp op, const MultiArgs& a, int sms, cudaStream_t s) {
  switch (op) {
    case RedOp::Sum:
    case RedOp::Avg:
    case RedOp::PreMulSum: return launch<E, SumOp>(a, sms, s);
    case RedOp::Prod: return launch<E, ProdOp>(a, sms, s);
    case RedOp::Min: return launch<E, MinOp>(a, sms, s);
    case RedOp::Max: return launch<E, MaxOp>(a, sms, s);
    case RedOp::BitAnd:
    case RedOp::BitOr:
    case RedOp::BitXor:
      if constexpr (std::is_integral_v<typename E::C>) {
        if (op == RedOp::BitAnd) return launch<E, BitAndOp>(a, sms, s);
        if (op == RedOp::BitOr) return launch<E, BitOrOp>(a, sms, s);
        return launch<E, BitXorOp>(a, sms, s);
      }
      return cudaErrorInvalidValue;  // a bitwise op on a floating type: never supported
  }
  return cudaErrorInvalidValue;
}

template <typename K>
cudaError_t load(K* kernel) {
  cudaFuncAttributes attr{};
  return cudaFuncGetAttributes(&attr, kernel);
}

template <typename E>
cudaError_t load_codec() {
  for (cudaError_t err : {load(reduce_multi_kernel<E, SumOp>), load(reduce_multi_kernel<E, ProdOp>),
                          load(reduce_multi_kernel<E, MinOp>), load(reduce_multi_kernel<E, MaxOp>)})
    if (err != cudaSuccess) return err;
  if constexpr (std::is_integral_v<typename E::C>) {
    for (cudaError_t err :
         {load(reduce_multi_kernel<E, BitAndOp>), load(reduce_multi_kernel<E, BitOrOp>),
          load(reduce_multi_kernel<E, BitXorOp>)})
      if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

}  // namespace

int load_multi_kernels() {
  for (cudaError_t err :
       {load_codec<NativeCodec<std::int8_t>>(), load_codec<NativeCodec<std::uint8_t>>(),
        load_codec<NativeCodec<std::int32_t>>(), load_codec<NativeCodec<std::uint32_t>>(),
        load_codec<NativeCodec<std::int64_t>>(), load_codec<NativeCodec<std::uint64_t>>(),
        load_codec<HalfCodec>(), load_codec<BFloat16Codec>(), load_codec<NativeCodec<float>>(),
        load_codec<NativeCodec<double>>(), load_codec<Fp8E4M3Codec>(), load_codec<Fp8E5M2Codec>()})
    if (err != cudaSuccess) return err;
  return cudaSuccess;
}

int reduce_multi_async(DataType dtype, RedOp op, const MultiArgs& a, int sms, void* stream) {
  if (!multi_valid(a)) return cudaErrorInvalidValue;
  if (a.count == 0) return cudaSuccess;
  auto s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case DataType::Int8: return launch_op<NativeCodec<std::int8_t>>(op, a, sms, s);
    case DataType::Uint8: return launch_op<NativeCodec<std::uint8_t>>(op, a, sms, s);
    case DataType::Int32: return launch_op<NativeCodec<std::int32_t>>(op, a, sms, s);
    case DataType::Uint32: return launch_op<NativeCodec<std::uint32_t>>(op, a, sms, s);
    case DataType::Int64: return launch_op<NativeCodec<std::int64_t>>(op, a, sms, s);
    case DataType::Uint64: return launch_op<NativeCodec<std::uint64_t>>(op, a, sms, s);
    case DataType::Float16: return launch_op<HalfCodec>(op, a, sms, s);
    case DataType::BFloat16: return launch_op<BFloat16Codec>(op, a, sms, s);
    case DataType::Float32: return launch_op<NativeCodec<float>>(op, a, sms, s);
    case DataType::Float64: return launch_op<NativeCodec<double>>(op, a, sms, s);
    case DataType::Float8E4M3: return launch_op<Fp8E4M3Codec>(op, a, sms, s);
    case DataType::Float8E5M2: return launch_op<Fp8E5M2Codec>(op, a, sms, s);
  }
  return cudaErrorInvalidValue;
}

}  // namespace loom::kernels::cuda
