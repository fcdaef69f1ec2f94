#include "tensor_args.hpp"

#include <c10/util/Exception.h>

#include <optional>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "torch_compat.hpp"

namespace loom_torch {
namespace {

std::optional<loom::DataType> reducible_dtype(at::ScalarType t) {
  switch (t) {
    case at::kChar: return loom::DataType::Int8;
    case at::kByte: return loom::DataType::Uint8;
    case at::kBool: return loom::DataType::Uint8;
    case at::kInt: return loom::DataType::Int32;
    case at::kUInt32: return loom::DataType::Uint32;
    case at::kLong: return loom::DataType::Int64;
    case at::kUInt64: return loom::DataType::Uint64;
    case at::kHalf: return loom::DataType::Float16;
    case at::kBFloat16: return loom::DataType::BFloat16;
    case at::kFloat: return loom::DataType::Float32;
    case at::kDouble: return loom::DataType::Float64;
    case at::kFloat8_e4m3fn: return loom::DataType::Float8E4M3;
    case at::kFloat8_e5m2: return loom::DataType::Float8E5M2;
    case at::kComplexFloat: return loom::DataType::Float32;
    case at::kComplexDouble: return loom::DataType::Float64;
    default: return std::nullopt;
  }
}

const char* op_name_of(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNUSED";
  }
}

}  // namespace

namespace {

std::optional<loom::RedOp> loom_op_of(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::SUM: return loom::RedOp::Sum;
    case c10d::ReduceOp::AVG: return loom::RedOp::Avg;
    case c10d::ReduceOp::PRODUCT: return loom::RedOp::Prod;
    case c10d::ReduceOp::MIN: return loom::RedOp::Min;
    case c10d::ReduceOp::MAX: return loom::RedOp::Max;
    case c10d::ReduceOp::PREMUL_SUM: return loom::RedOp::PreMulSum;
    case c10d::ReduceOp::BAND: return loom::RedOp::BitAnd;
    case c10d::ReduceOp::BOR: return loom::RedOp::BitOr;
    case c10d::ReduceOp::BXOR: return loom::RedOp::BitXor;
    default: return std::nullopt;
  }
}

// PREMUL_SUM's factor: torch keeps it in the ReduceOp's supplement (a double or a one-element
// tensor, which may live on a device: read it on the host).
double premul_factor(const char* op_name, const c10d::ReduceOp& rop) {
  TORCH_CHECK_VALUE(rop.supplement_, "loom ", op_name,
                    ": ReduceOp.PREMUL_SUM without its factor (make it with "
                    "torch.distributed._make_nccl_premul_sum(factor))");
  const auto* sup = dynamic_cast<const compat::PreMulSumSupplement*>(rop.supplement_.get());
  TORCH_CHECK_VALUE(sup, "loom ", op_name, ": ReduceOp.PREMUL_SUM carries no PreMulSum factor");
  if (!sup->tensor_factor.defined()) return sup->double_factor;
  TORCH_CHECK_VALUE(sup->tensor_factor.numel() == 1, "loom ", op_name,
                    ": PREMUL_SUM's factor tensor has ", sup->tensor_factor.numel(),
                    " elements, expected 1");
  return sup->tensor_factor.to(at::kCPU).to(at::kDouble).item<double>();
}

}  // namespace

ReduceMapping map_reduction(const char* op_name, at::ScalarType dtype, const c10d::ReduceOp& rop) {
  const auto op = rop.op_;
  const std::optional<loom::RedOp> lop = loom_op_of(op);
  TORCH_CHECK(lop.has_value(), "loom does not support ReduceOp.", op_name_of(op), " (", op_name,
              "): loom reduces with SUM, PRODUCT, MIN, MAX, AVG, PREMUL_SUM, BAND, BOR and BXOR");
  auto ldt = reducible_dtype(dtype);
  TORCH_CHECK_TYPE(ldt.has_value(), "loom cannot reduce tensors of dtype ", dtype, " (", op_name,
                   "): loom reduces int8, uint8, int32, uint32, int64, uint64, float16, bfloat16, "
                   "float32, float64, float8_e4m3fn, float8_e5m2, bool and complex (SUM, AVG, "
                   "PREMUL_SUM)");
  ReduceMapping m{*ldt, *lop, 1};
  if (op == c10d::ReduceOp::PREMUL_SUM) m.scalar = premul_factor(op_name, rop);
  if (dtype == at::kBool) {
    TORCH_CHECK(op != c10d::ReduceOp::AVG && op != c10d::ReduceOp::PREMUL_SUM,
                "loom cannot reduce bool tensors with ",
                op == c10d::ReduceOp::AVG ? "AVG" : "PREMUL_SUM", " (", op_name, ")");
    if (op == c10d::ReduceOp::SUM) m.op = loom::RedOp::Max;      // logical or
    if (op == c10d::ReduceOp::PRODUCT) m.op = loom::RedOp::Min;  // logical and
  } else if (at::isComplexType(dtype)) {
    TORCH_CHECK(
        op == c10d::ReduceOp::SUM || op == c10d::ReduceOp::AVG || op == c10d::ReduceOp::PREMUL_SUM,
        "loom cannot reduce complex tensors with ReduceOp.", op_name_of(op), " (", op_name,
        "): only SUM, AVG and PREMUL_SUM (real factor) are elementwise on the real and "
        "imaginary parts");
    m.elems_per_element = 2;
  }
  TORCH_CHECK_TYPE(loom::supports(m.dtype, m.op), "loom cannot reduce tensors of dtype ", dtype,
                   " with ReduceOp.", op_name_of(op), " (", op_name,
                   "): the bitwise ops take integer and bool tensors");
  return m;
}

at::Device check_devices(const char* op_name, const std::vector<at::Tensor>& tensors) {
  TORCH_CHECK_VALUE(!tensors.empty(), "loom ", op_name, ": no tensors given");
  const at::Device device = tensors.front().device();
  for (const auto& t : tensors) {
    TORCH_CHECK_VALUE(t.layout() == at::kStrided, "loom ", op_name,
                      ": only dense (strided) tensors are supported, got layout ", t.layout());
    TORCH_CHECK_VALUE(t.device() == device, "loom ", op_name,
                      ": all tensors of one call must be on one device, got ", device, " and ",
                      t.device());
  }
#ifdef LOOM_TORCH_LOOM_CUDA
  TORCH_CHECK_VALUE(device.is_cpu() || device.is_cuda(), "loom ", op_name, ": got a tensor on ",
                    device, "; loom serves CPU and CUDA tensors");
#else
  TORCH_CHECK_VALUE(device.is_cpu(), "loom ", op_name, ": got a tensor on ", device,
                    "; this build of the loom backend serves CPU tensors only (its loom was "
                    "built without the CUDA path: build loom with LOOM_CUDA=ON)");
#endif
  return device;
}

void check_single(const char* op_name, const std::vector<at::Tensor>& tensors) {
  TORCH_CHECK_VALUE(tensors.size() == 1, "loom ", op_name,
                    " takes exactly one tensor per process, got ", tensors.size());
}

void check_same_shape(const char* op_name, const std::vector<at::Tensor>& tensors,
                      at::ScalarType dtype, int64_t numel) {
  for (const auto& t : tensors) {
    TORCH_CHECK_TYPE(t.scalar_type() == dtype, "loom ", op_name, ": tensors of dtype ", dtype,
                     " and ", t.scalar_type(), " in one call");
    TORCH_CHECK_VALUE(t.numel() == numel, "loom ", op_name, ": a tensor has ", t.numel(),
                      " elements where ", numel, " are needed");
  }
}

at::Tensor contiguous_staging(const at::Tensor& t) {
  return t.is_contiguous() ? t : t.contiguous();
}

at::Tensor flat_buffer(const at::Tensor& like, int64_t n) {
  return at::empty({n * like.numel()}, like.options().memory_format(at::MemoryFormat::Contiguous));
}

AlltoallLayout alltoall_layout(const char* side, const at::Tensor& t,
                               const std::vector<int64_t>& splits, int size) {
  const int64_t numel = t.numel();
  const std::size_t es = t.element_size();
  AlltoallLayout l;
  if (splits.empty()) {
    TORCH_CHECK_VALUE(numel % size == 0, "loom all_to_all_single: the ", side, " tensor has ",
                      numel, " elements, not a multiple of the group size ", size,
                      " (give split sizes for uneven blocks)");
    l.counts.assign(size, static_cast<std::size_t>(numel / size) * es);
  } else {
    TORCH_CHECK_VALUE(static_cast<int>(splits.size()) == size,
                      "loom all_to_all_single: ", splits.size(), " ", side,
                      " split sizes for a group of ", size);
    const int64_t dim0 = t.dim() > 0 ? t.size(0) : 1;
    const int64_t row = dim0 > 0 ? numel / dim0 : 0;
    int64_t rows = 0;
    for (int64_t s : splits) {
      TORCH_CHECK_VALUE(s >= 0, "loom all_to_all_single: negative ", side, " split size ", s);
      rows += s;
      l.counts.push_back(static_cast<std::size_t>(s * row) * es);
    }
    TORCH_CHECK_VALUE(rows == dim0, "loom all_to_all_single: the ", side, " split sizes add up to ",
                      rows, " rows, the tensor has ", dim0);
  }
  std::size_t at = 0;
  for (std::size_t c : l.counts) {
    l.displs.push_back(at);
    at += c;
  }
  return l;
}

}  // namespace loom_torch
