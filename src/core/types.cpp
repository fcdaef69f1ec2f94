// Names of the public enums.
#include "loom/types.hpp"

#include <array>
#include <cctype>
#include <string>

namespace loom {
namespace {

constexpr std::array<std::string_view, kNumDataTypes> kDtypeNames = {
    "int8", "uint8",    "int32", "uint32", "int64",  "uint64",
    "half", "bfloat16", "float", "double", "f8e4m3", "f8e5m2"};
constexpr std::array<std::string_view, kNumRedOps> kOpNames = {
    "sum", "prod", "min", "max", "avg", "premul_sum", "band", "bor", "bxor"};

struct Alias {
  std::string_view name;
  DataType dtype;
};
constexpr std::array kDtypeAliases = {
    Alias{"char", DataType::Int8},
    Alias{"i8", DataType::Int8},
    Alias{"u8", DataType::Uint8},
    Alias{"int", DataType::Int32},
    Alias{"i32", DataType::Int32},
    Alias{"u32", DataType::Uint32},
    Alias{"i64", DataType::Int64},
    Alias{"u64", DataType::Uint64},
    Alias{"fp16", DataType::Float16},
    Alias{"float16", DataType::Float16},
    Alias{"f16", DataType::Float16},
    Alias{"bf16", DataType::BFloat16},
    Alias{"fp32", DataType::Float32},
    Alias{"float32", DataType::Float32},
    Alias{"f32", DataType::Float32},
    Alias{"fp64", DataType::Float64},
    Alias{"float64", DataType::Float64},
    Alias{"f64", DataType::Float64},
    Alias{"fp8_e4m3", DataType::Float8E4M3},
    Alias{"fp8e4m3", DataType::Float8E4M3},
    Alias{"float8_e4m3", DataType::Float8E4M3},
    Alias{"e4m3", DataType::Float8E4M3},
    Alias{"fp8_e5m2", DataType::Float8E5M2},
    Alias{"fp8e5m2", DataType::Float8E5M2},
    Alias{"float8_e5m2", DataType::Float8E5M2},
    Alias{"e5m2", DataType::Float8E5M2},
};

struct OpAlias {
  std::string_view name;
  RedOp op;
};
constexpr std::array kOpAliases = {
    OpAlias{"product", RedOp::Prod},
    OpAlias{"premulsum", RedOp::PreMulSum},
    OpAlias{"pre_mul_sum", RedOp::PreMulSum},
    OpAlias{"bitand", RedOp::BitAnd},
    OpAlias{"bit_and", RedOp::BitAnd},
    OpAlias{"and", RedOp::BitAnd},
    OpAlias{"bitor", RedOp::BitOr},
    OpAlias{"bit_or", RedOp::BitOr},
    OpAlias{"or", RedOp::BitOr},
    OpAlias{"bitxor", RedOp::BitXor},
    OpAlias{"bit_xor", RedOp::BitXor},
    OpAlias{"xor", RedOp::BitXor},
};

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::string_view to_string(DataType t) noexcept {
  auto i = static_cast<std::size_t>(t);
  return i < kDtypeNames.size() ? kDtypeNames[i] : "invalid-dtype";
}

std::string_view to_string(RedOp op) noexcept {
  auto i = static_cast<std::size_t>(op);
  return i < kOpNames.size() ? kOpNames[i] : "invalid-op";
}

std::optional<DataType> parse_dtype(std::string_view name) noexcept {
  std::string n = lower(name);
  for (std::size_t i = 0; i < kDtypeNames.size(); ++i)
    if (n == kDtypeNames[i]) return static_cast<DataType>(i);
  for (const Alias& a : kDtypeAliases)
    if (n == a.name) return a.dtype;
  return std::nullopt;
}

std::optional<RedOp> parse_redop(std::string_view name) noexcept {
  std::string n = lower(name);
  for (std::size_t i = 0; i < kOpNames.size(); ++i)
    if (n == kOpNames[i]) return static_cast<RedOp>(i);
  for (const OpAlias& a : kOpAliases)
    if (n == a.name) return a.op;
  return std::nullopt;
}

}  // namespace loom
