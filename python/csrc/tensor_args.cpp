#include "tensor_args.hpp"

#include <c10/util/Exception.h>

#include <optional>

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

ReduceMapping map_reduction(const char* op_name, at::ScalarType dtype, const c10d::ReduceOp& rop) {
  const auto op = rop.op_;
  std::optional<loom::RedOp> lop;
  switch (op) {
    case c10d::ReduceOp::SUM: lop = loom::RedOp::Sum; break;
    case c10d::ReduceOp::AVG: lop = loom::RedOp::Avg; break;
    case c10d::ReduceOp::PRODUCT: lop = loom::RedOp::Prod; break;
    case c10d::ReduceOp::MIN: lop = loom::RedOp::Min; break;
    case c10d::ReduceOp::MAX: lop = loom::RedOp::Max; break;
    default: break;
  }
  TORCH_CHECK(lop.has_value(), "loom does not support ReduceOp.", op_name_of(op), " yet (", op_name,
              "): loom reduces with SUM, PRODUCT, MIN, MAX and AVG");
  auto ldt = reducible_dtype(dtype);
  TORCH_CHECK_TYPE(ldt.has_value(), "loom cannot reduce tensors of dtype ", dtype, " (", op_name,
                   "): loom reduces int8, uint8, int32, uint32, int64, uint64, float16, bfloat16, "
                   "float32, float64, float8_e4m3fn, float8_e5m2, bool and complex (SUM, AVG)");
  ReduceMapping m{*ldt, *lop, 1};
  if (dtype == at::kBool) {
    TORCH_CHECK(op != c10d::ReduceOp::AVG, "loom cannot reduce bool tensors with AVG (", op_name,
                ")");
    if (op == c10d::ReduceOp::SUM) m.op = loom::RedOp::Max;      // logical or
    if (op == c10d::ReduceOp::PRODUCT) m.op = loom::RedOp::Min;  // logical and
  } else if (at::isComplexType(dtype)) {
    TORCH_CHECK(op == c10d::ReduceOp::SUM || op == c10d::ReduceOp::AVG,
                "loom cannot reduce complex tensors with ReduceOp.", op_name_of(op), " (", op_name,
                "): only SUM and AVG are elementwise on the real and imaginary parts");
    m.elems_per_element = 2;
  }
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
  TORCH_CHECK_VALUE(device.is_cpu(), "loom ", op_name, ": got a tensor on ", device,
                    "; this build of the loom backend serves CPU tensors only");
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

void unsupported_op(const char* op_name) {
  TORCH_CHECK(false, "loom does not support ", op_name,
              " yet: point-to-point (send/recv), gather/scatter and all-to-all arrive with "
              "loom's next API (issue 24); until then run them on a gloo group "
              "(torch.distributed.new_group(backend=\"gloo\"))");
}

}  // namespace loom_torch
