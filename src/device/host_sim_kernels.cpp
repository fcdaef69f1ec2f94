#include "device/host_sim_kernels.hpp"

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/reduce_logic.hpp"
#include "kernels/cuda/reduce_multi_logic.hpp"

namespace loom::device::sim {
namespace {

namespace kc = kernels::cuda;

constexpr unsigned kThreads = 256;  // as reduce_kernels.cu

template <typename E, typename Op>
void emulate_reduce(void* dst, const void* a, const void* b, std::size_t count, int sms) {
  using S = typename E::S;
  const kc::Split s = kc::split_for_vectors(reinterpret_cast<std::uintptr_t>(dst),
                                            reinterpret_cast<std::uintptr_t>(a),
                                            reinterpret_cast<std::uintptr_t>(b), count, sizeof(S));
  const kc::GridShape g = kc::grid_for(kc::work_items(s), sms, kThreads);
  const std::size_t nthreads = std::size_t{g.blocks} * g.threads;
  for (std::size_t t = 0; t < nthreads; ++t)
    kc::reduce_thread<E, Op, kc::HostMemory>(static_cast<S*>(dst), static_cast<const S*>(a),
                                             static_cast<const S*>(b), s, t, nthreads);
}

template <typename E>
void emulate_op(RedOp op, void* dst, const void* a, const void* b, std::size_t count, int sms) {
  switch (op) {
    case RedOp::Sum:
    case RedOp::Avg:
    case RedOp::PreMulSum: return emulate_reduce<E, kc::SumOp>(dst, a, b, count, sms);
    case RedOp::Prod: return emulate_reduce<E, kc::ProdOp>(dst, a, b, count, sms);
    case RedOp::Min: return emulate_reduce<E, kc::MinOp>(dst, a, b, count, sms);
    case RedOp::Max: return emulate_reduce<E, kc::MaxOp>(dst, a, b, count, sms);
    case RedOp::BitAnd:
    case RedOp::BitOr:
    case RedOp::BitXor:
      // Integer types only (validation refuses the others, as reduce_async does).
      if constexpr (std::is_integral_v<typename E::C>) {
        if (op == RedOp::BitAnd) return emulate_reduce<E, kc::BitAndOp>(dst, a, b, count, sms);
        if (op == RedOp::BitOr) return emulate_reduce<E, kc::BitOrOp>(dst, a, b, count, sms);
        return emulate_reduce<E, kc::BitXorOp>(dst, a, b, count, sms);
      }
      return;
  }
}

template <typename E>
void emulate_divide(void* x, std::size_t count, int n, int sms) {
  using S = typename E::S;
  const auto addr = reinterpret_cast<std::uintptr_t>(x);
  const kc::Split s = kc::split_for_vectors(addr, addr, addr, count, sizeof(S));
  const kc::GridShape g = kc::grid_for(kc::work_items(s), sms, kThreads);
  const std::size_t nthreads = std::size_t{g.blocks} * g.threads;
  for (std::size_t t = 0; t < nthreads; ++t)
    kc::divide_thread<E, kc::HostMemory>(static_cast<S*>(x), n, s, t, nthreads);
}

template <typename E, typename Op>
void emulate_multi(const kc::MultiArgs& a, int sms) {
  const kc::Split s = kc::split_multi(a, sizeof(typename E::S));
  const kc::GridShape g = kc::grid_for(kc::work_items(s), sms, kThreads);
  const std::size_t nthreads = std::size_t{g.blocks} * g.threads;
  for (std::size_t t = 0; t < nthreads; ++t)
    kc::reduce_multi_thread<E, Op, kc::HostMemory>(a, s, t, nthreads);
}

template <typename E>
void emulate_multi_op(RedOp op, const kc::MultiArgs& a, int sms) {
  switch (op) {
    case RedOp::Sum:
    case RedOp::Avg:
    case RedOp::PreMulSum: return emulate_multi<E, kc::SumOp>(a, sms);
    case RedOp::Prod: return emulate_multi<E, kc::ProdOp>(a, sms);
    case RedOp::Min: return emulate_multi<E, kc::MinOp>(a, sms);
    case RedOp::Max: return emulate_multi<E, kc::MaxOp>(a, sms);
    case RedOp::BitAnd:
    case RedOp::BitOr:
    case RedOp::BitXor:
      if constexpr (std::is_integral_v<typename E::C>) {
        if (op == RedOp::BitAnd) return emulate_multi<E, kc::BitAndOp>(a, sms);
        if (op == RedOp::BitOr) return emulate_multi<E, kc::BitOrOp>(a, sms);
        return emulate_multi<E, kc::BitXorOp>(a, sms);
      }
      return;
  }
}

}  // namespace

void reduce_multi(DataType dtype, RedOp op, const kc::MultiArgs& a, int sms) {
  if (a.count == 0 || !kc::multi_valid(a) || kc::multi_skipped(a)) return;
  switch (dtype) {
    case DataType::Int8: return emulate_multi_op<kc::NativeCodec<std::int8_t>>(op, a, sms);
    case DataType::Uint8: return emulate_multi_op<kc::NativeCodec<std::uint8_t>>(op, a, sms);
    case DataType::Int32: return emulate_multi_op<kc::NativeCodec<std::int32_t>>(op, a, sms);
    case DataType::Uint32: return emulate_multi_op<kc::NativeCodec<std::uint32_t>>(op, a, sms);
    case DataType::Int64: return emulate_multi_op<kc::NativeCodec<std::int64_t>>(op, a, sms);
    case DataType::Uint64: return emulate_multi_op<kc::NativeCodec<std::uint64_t>>(op, a, sms);
    case DataType::Float16: return emulate_multi_op<kc::HalfCodec>(op, a, sms);
    case DataType::BFloat16: return emulate_multi_op<kc::BFloat16Codec>(op, a, sms);
    case DataType::Float32: return emulate_multi_op<kc::NativeCodec<float>>(op, a, sms);
    case DataType::Float64: return emulate_multi_op<kc::NativeCodec<double>>(op, a, sms);
    case DataType::Float8E4M3: return emulate_multi_op<kc::Fp8E4M3Codec>(op, a, sms);
    case DataType::Float8E5M2: return emulate_multi_op<kc::Fp8E5M2Codec>(op, a, sms);
  }
}

void reduce(DataType dtype, RedOp op, void* dst, const void* a, const void* b, std::size_t count,
            int sms) {
  if (count == 0) return;
  switch (dtype) {
    case DataType::Int8: return emulate_op<kc::NativeCodec<std::int8_t>>(op, dst, a, b, count, sms);
    case DataType::Uint8:
      return emulate_op<kc::NativeCodec<std::uint8_t>>(op, dst, a, b, count, sms);
    case DataType::Int32:
      return emulate_op<kc::NativeCodec<std::int32_t>>(op, dst, a, b, count, sms);
    case DataType::Uint32:
      return emulate_op<kc::NativeCodec<std::uint32_t>>(op, dst, a, b, count, sms);
    case DataType::Int64:
      return emulate_op<kc::NativeCodec<std::int64_t>>(op, dst, a, b, count, sms);
    case DataType::Uint64:
      return emulate_op<kc::NativeCodec<std::uint64_t>>(op, dst, a, b, count, sms);
    case DataType::Float16: return emulate_op<kc::HalfCodec>(op, dst, a, b, count, sms);
    case DataType::BFloat16: return emulate_op<kc::BFloat16Codec>(op, dst, a, b, count, sms);
    case DataType::Float32: return emulate_op<kc::NativeCodec<float>>(op, dst, a, b, count, sms);
    case DataType::Float64: return emulate_op<kc::NativeCodec<double>>(op, dst, a, b, count, sms);
    case DataType::Float8E4M3: return emulate_op<kc::Fp8E4M3Codec>(op, dst, a, b, count, sms);
    case DataType::Float8E5M2: return emulate_op<kc::Fp8E5M2Codec>(op, dst, a, b, count, sms);
  }
}

void divide(DataType dtype, void* x, std::size_t count, int n, int sms) {
  if (count == 0 || n < 1) return;
  switch (dtype) {
    case DataType::Int8: return emulate_divide<kc::NativeCodec<std::int8_t>>(x, count, n, sms);
    case DataType::Uint8: return emulate_divide<kc::NativeCodec<std::uint8_t>>(x, count, n, sms);
    case DataType::Int32: return emulate_divide<kc::NativeCodec<std::int32_t>>(x, count, n, sms);
    case DataType::Uint32: return emulate_divide<kc::NativeCodec<std::uint32_t>>(x, count, n, sms);
    case DataType::Int64: return emulate_divide<kc::NativeCodec<std::int64_t>>(x, count, n, sms);
    case DataType::Uint64: return emulate_divide<kc::NativeCodec<std::uint64_t>>(x, count, n, sms);
    case DataType::Float16: return emulate_divide<kc::HalfCodec>(x, count, n, sms);
    case DataType::BFloat16: return emulate_divide<kc::BFloat16Codec>(x, count, n, sms);
    case DataType::Float32: return emulate_divide<kc::NativeCodec<float>>(x, count, n, sms);
    case DataType::Float64: return emulate_divide<kc::NativeCodec<double>>(x, count, n, sms);
    case DataType::Float8E4M3: return emulate_divide<kc::Fp8E4M3Codec>(x, count, n, sms);
    case DataType::Float8E5M2: return emulate_divide<kc::Fp8E5M2Codec>(x, count, n, sms);
  }
}

}  // namespace loom::device::sim
