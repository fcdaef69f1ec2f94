// loom-kernel-bench: bandwidth of the reduction kernels. With --device cuda, the device kernels
// (kernels/cuda) through the device seam, for the targets of docs/gpu.md (a reduce of N bytes
// moves 3N: two inputs read, one output written), each size next to a device-to-device copy of
// the same size measured in the same run (the memory's limit) and each kernel's output checked
// against the host kernels (device_bench.cpp); with --device host, the vectorised host kernels
// (kernels/host) that every host-memory collective reduces with.
//
//   loom-kernel-bench [--device cuda|host|host-sim] [-b MIN] [-e SIZE] [-f FACTOR] [-n ITERS]
//                     [-d TYPE,...] [-o OP,...] [--copy 0|1] [--check 0|1]
//
// Prints one row per (size, dtype, op): size, time per kernel, GB/s of 3N bytes; on a device
// also a copy row per size, the kernel's share of the copy's GB/s and the check. Without -b only
// the size -e runs. --device host-sim runs the device kernels' logic on the host over an
// emulated grid: a smoke test, not a speed figure. Exit status: 0, 1 a wrong value, 2 usage,
// 3 error.
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "benchmarks/kernel_bench/kernel_bench.hpp"
#include "kernels/host/reduce.hpp"
#include "loom/error.hpp"
#include "loom/types.hpp"

namespace loom::kbench {

std::vector<std::size_t> size_list(const Args& a) {
  if (a.min_bytes == 0) return {a.max_bytes};
  std::vector<std::size_t> out;
  for (std::size_t b = a.min_bytes; b <= a.max_bytes; b *= a.factor) {
    out.push_back(b);
    if (a.factor < 2) break;
  }
  return out;
}

}  // namespace loom::kbench

namespace {

using loom::kbench::Args;

std::size_t parse_size(std::string_view s) {
  std::size_t mult = 1;
  if (!s.empty() && (s.back() == 'K' || s.back() == 'M' || s.back() == 'G')) {
    mult = s.back() == 'K' ? 1u << 10 : s.back() == 'M' ? 1u << 20 : 1u << 30;
    s.remove_suffix(1);
  }
  return std::stoull(std::string(s)) * mult;
}

template <typename T, typename Parse>
std::vector<T> parse_list(std::string_view s, Parse parse) {
  std::vector<T> out;
  while (!s.empty()) {
    const std::size_t comma = s.find(',');
    auto v = parse(s.substr(0, comma));
    if (!v) throw std::invalid_argument(fmt::format("unknown value '{}'", s.substr(0, comma)));
    out.push_back(*v);
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  return out;
}

bool parse_flag(std::string_view f, std::string_view v) {
  if (v != "0" && v != "1") throw std::invalid_argument(fmt::format("{} takes 0 or 1", f));
  return v == "1";
}

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string_view f = argv[i];
    if (f == "-h" || f == "--help") {
      fmt::print(
          "usage: loom-kernel-bench [--device cuda|host|host-sim] [-b MIN] [-e SIZE] "
          "[-f FACTOR] [-n ITERS] [-d TYPE,...] [-o OP,...] [--copy 0|1] [--check 0|1]\n");
      std::exit(0);
    }
    if (i + 1 >= argc) throw std::invalid_argument(fmt::format("{} needs a value", f));
    const std::string_view v = argv[++i];
    if (f == "--device") {
      a.device = std::string(v);
    } else if (f == "-b") {
      a.min_bytes = parse_size(v);
    } else if (f == "-e") {
      a.max_bytes = parse_size(v);
    } else if (f == "-f") {
      a.factor = parse_size(v);
    } else if (f == "-n") {
      a.iters = std::stoi(std::string(v));
    } else if (f == "-d") {
      a.dtypes = parse_list<loom::DataType>(v, loom::parse_dtype);
    } else if (f == "-o") {
      a.ops = parse_list<loom::RedOp>(v, loom::parse_redop);
    } else if (f == "--copy") {
      a.copy = parse_flag(f, v);
    } else if (f == "--check") {
      a.check = parse_flag(f, v);
    } else {
      throw std::invalid_argument(fmt::format("unknown option '{}'", f));
    }
  }
  if (a.max_bytes == 0 || a.iters < 1 || a.factor < 2 || a.min_bytes > a.max_bytes)
    throw std::invalid_argument("sizes need 0 < -b <= -e, -f >= 2 and -n >= 1");
  return a;
}

// The host kernels on zeroed buffers (no subnormal or NaN lanes to slow any dtype down).
int run_host(const Args& a) {
  fmt::print(
      "# loom-kernel-bench on host (kernels/host): {} iterations; GB/s counts 3 x bytes (two "
      "inputs read, one output written)\n",
      a.iters);
  fmt::print("{:>12}  {:>9}  {:>5}  {:>10}  {:>8}\n", "bytes", "type", "op", "time(us)", "GB/s");
  for (const std::size_t size : loom::kbench::size_list(a)) {
    std::vector<std::byte> x(size), y(size), z(size);  // value-initialised: zeros
    for (loom::DataType t : a.dtypes) {
      const std::size_t count = size / loom::dtype_size(t);
      for (loom::RedOp op : a.ops) {
        if (!loom::supports(t, op)) continue;  // bitwise ops: integer types only
        loom::kernels::reduce(t, op, z.data(), x.data(), y.data(), count);  // warm-up
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < a.iters; ++i)
          loom::kernels::reduce(t, op, z.data(), x.data(), y.data(), count);
        const std::chrono::duration<double> el = std::chrono::steady_clock::now() - start;
        const double sec = el.count() / a.iters;
        const double bytes = 3.0 * static_cast<double>(count * loom::dtype_size(t));
        fmt::print("{:>12}  {:>9}  {:>5}  {:>10.1f}  {:>8.1f}\n", count * loom::dtype_size(t),
                   loom::to_string(t), loom::to_string(op), sec * 1e6, bytes / sec / 1e9);
      }
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  try {
    args = parse_args(argc, argv);
  } catch (const std::exception& e) {
    fmt::print(stderr, "loom-kernel-bench: {}\n", e.what());
    return 2;
  }
  try {
    return args.device == "host" ? run_host(args) : loom::kbench::run_device(args);
  } catch (const loom::Error& e) {
    fmt::print(stderr, "loom-kernel-bench: {}\n", e.what());
    return 3;
  } catch (const std::exception& e) {
    fmt::print(stderr, "loom-kernel-bench: {}\n", e.what());
    return 3;
  }
}
