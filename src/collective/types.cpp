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

/// Another accepted name of an enum value.
template <typename E>
struct Alias {
  std::string_view name;
  E value;
};
using DtypeAlias = Alias<DataType>;
using OpAlias = Alias<RedOp>;

constexpr std::array kDtypeAliases = {
    DtypeAlias{"char", DataType::Int8},
    DtypeAlias{"i8", DataType::Int8},
    DtypeAlias{"u8", DataType::Uint8},
    DtypeAlias{"int", DataType::Int32},
    DtypeAlias{"i32", DataType::Int32},
    DtypeAlias{"u32", DataType::Uint32},
    DtypeAlias{"i64", DataType::Int64},
    DtypeAlias{"u64", DataType::Uint64},
    DtypeAlias{"fp16", DataType::Float16},
    DtypeAlias{"float16", DataType::Float16},
    DtypeAlias{"f16", DataType::Float16},
    DtypeAlias{"bf16", DataType::BFloat16},
    DtypeAlias{"fp32", DataType::Float32},
    DtypeAlias{"float32", DataType::Float32},
    DtypeAlias{"f32", DataType::Float32},
    DtypeAlias{"fp64", DataType::Float64},
    DtypeAlias{"float64", DataType::Float64},
    DtypeAlias{"f64", DataType::Float64},
    DtypeAlias{"fp8_e4m3", DataType::Float8E4M3},
    DtypeAlias{"fp8e4m3", DataType::Float8E4M3},
    DtypeAlias{"float8_e4m3", DataType::Float8E4M3},
    DtypeAlias{"e4m3", DataType::Float8E4M3},
    DtypeAlias{"fp8_e5m2", DataType::Float8E5M2},
    DtypeAlias{"fp8e5m2", DataType::Float8E5M2},
    DtypeAlias{"float8_e5m2", DataType::Float8E5M2},
    DtypeAlias{"e5m2", DataType::Float8E5M2},
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

/// The name of `value` (its index in `names`), or `invalid` when out of range.
template <typename E, std::size_t N>
std::string_view name_of(E value, const std::array<std::string_view, N>& names,
                         std::string_view invalid) noexcept {
  const auto i = static_cast<std::size_t>(value);
  return i < names.size() ? names[i] : invalid;
}

/// The enum value whose name (the index in `names`) or alias is `name`, case-insensitively.
template <typename E, std::size_t N, std::size_t M>
std::optional<E> parse_named(std::string_view name, const std::array<std::string_view, N>& names,
                             const std::array<Alias<E>, M>& aliases) {
  const std::string n = lower(name);
  for (std::size_t i = 0; i < names.size(); ++i)
    if (n == names[i]) return static_cast<E>(i);
  for (const Alias<E>& a : aliases)
    if (n == a.name) return a.value;
  return std::nullopt;
}

}  // namespace

std::string_view to_string(DataType t) noexcept {
  return name_of(t, kDtypeNames, "invalid-dtype");
}

std::string_view to_string(RedOp op) noexcept {
  return name_of(op, kOpNames, "invalid-op");
}

std::optional<DataType> parse_dtype(std::string_view name) noexcept {
  return parse_named(name, kDtypeNames, kDtypeAliases);
}

std::optional<RedOp> parse_redop(std::string_view name) noexcept {
  return parse_named(name, kOpNames, kOpAliases);
}

}  // namespace loom
