// The size sweep that loom-perf and the baseline benchmarks share (nccl-tests'
// -b/-e/-f/-i/-n/-w/-c): the sizes a run measures and how a size is written on the command line.
// Header-only, so the baselines, built without libloom's benchmark code, use the same definition.
#pragma once

#include <fmt/format.h>

#include <charconv>
#include <cstddef>
#include <limits>
#include <optional>
#include <string_view>
#include <system_error>
#include <vector>

namespace loom::bench {

/// The sweep's settings; each benchmark's Options derives from it.
struct SweepOptions {
  std::size_t min_bytes = 8;
  std::size_t max_bytes = std::size_t{32} << 20;
  std::size_t step_factor = 2;  // used when step_bytes == 0
  std::size_t step_bytes = 0;   // > 0: sizes grow by this many bytes instead
  int iters = 20;
  int warmup = 5;
  bool check = true;
};

/// The help lines of the sweep's flags (-b -e -f -i -n -w), as every benchmark prints them.
inline constexpr std::string_view kSweepUsage =
    "  -b, --minbytes SIZE       smallest size in bytes, K/M/G suffixes (default 8)\n"
    "  -e, --maxbytes SIZE       largest size in bytes (default 32M)\n"
    "  -f, --stepfactor N        multiply the size by N each step (default 2)\n"
    "  -i, --stepbytes SIZE      add SIZE bytes each step instead of -f\n"
    "  -n, --iters N             timed iterations (default 20)\n"
    "  -w, --warmup_iters N      warmup iterations (default 5)\n";

/// "64", "64B", "8K", "8KB", "1M", "2G" (binary multiples) -> bytes; nullopt when malformed or
/// too large for size_t.
inline std::optional<std::size_t> parse_size(std::string_view text) noexcept {
  std::size_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data()) return std::nullopt;
  std::string_view suffix(end, static_cast<std::size_t>(text.data() + text.size() - end));
  if (suffix.size() == 2 && (suffix[1] == 'B' || suffix[1] == 'b')) suffix.remove_suffix(1);
  int shift = 0;
  if (suffix == "K" || suffix == "k") {
    shift = 10;
  } else if (suffix == "M" || suffix == "m") {
    shift = 20;
  } else if (suffix == "G" || suffix == "g") {
    shift = 30;
  } else if (!suffix.empty() && suffix != "B" && suffix != "b") {
    return std::nullopt;
  }
  if (value > (std::numeric_limits<std::size_t>::max() >> shift)) return std::nullopt;
  return value << shift;
}

/// A size flag's value (parse_size); throws Error naming the flag when malformed.
template <typename Error>
std::size_t size_value(std::string_view flag, std::string_view text) {
  const std::optional<std::size_t> size = parse_size(text);
  if (!size) throw Error(fmt::format("invalid size '{}' for {}", text, flag));
  return *size;
}

/// An integer flag's value in [lo, hi]; throws Error naming the flag and the range otherwise.
template <typename Error>
long long int_value(std::string_view flag, std::string_view text, long long lo, long long hi) {
  long long value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < lo || value > hi) {
    throw Error(fmt::format("invalid value '{}' for {} (expected an integer in [{}, {}])", text,
                            flag, lo, hi));
  }
  return value;
}

/// The sizes from min_bytes to max_bytes, growing by step_bytes or (when 0) by step_factor;
/// stops before a step would overflow.
inline std::vector<std::size_t> size_list(const SweepOptions& options) {
  std::vector<std::size_t> sizes;
  std::size_t size = options.min_bytes;
  while (size <= options.max_bytes) {
    sizes.push_back(size);
    std::size_t next = 0;
    if (options.step_bytes > 0) {
      next = size + options.step_bytes;
    } else if (size == 0) {
      next = 1;
    } else if (size <= std::numeric_limits<std::size_t>::max() / options.step_factor) {
      next = size * options.step_factor;
    }
    if (next <= size) break;  // overflow
    size = next;
  }
  return sizes;
}

}  // namespace loom::bench
