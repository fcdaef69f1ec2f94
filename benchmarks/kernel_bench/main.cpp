// loom-kernel-bench: bandwidth of the reduction kernels. With --device cuda, the device kernels
// (kernels/cuda) through the device seam, for the issue-6 target "90% of device memory bandwidth
// at 64 MiB, counting bytes read + written" (a reduce of N bytes moves 3N: two inputs read, one
// output written); with --device host, the vectorised host kernels (kernels/host) that every
// host-memory collective reduces with.
//
//   loom-kernel-bench [--device cuda|host|host-sim] [-e SIZE] [-n ITERS] [-d TYPE,...] [-o OP,...]
//
// Prints one row per (dtype, op): size, time per kernel, GB/s of 3N bytes. --device host-sim
// runs the device kernels' logic on the host over an emulated grid: a smoke test, not a speed
// figure.
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "device/device.hpp"
#include "kernels/host/reduce.hpp"
#include "loom/error.hpp"
#include "loom/types.hpp"

namespace {

struct Args {
  std::string device = "cuda";
  std::size_t bytes = std::size_t{64} << 20;
  int iters = 20;
  std::vector<loom::DataType> dtypes{loom::DataType::Float32, loom::DataType::BFloat16,
                                     loom::DataType::Float16, loom::DataType::Float8E4M3,
                                     loom::DataType::Float8E5M2};
  std::vector<loom::RedOp> ops{loom::RedOp::Sum};
};

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

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string_view f = argv[i];
    if (f == "-h" || f == "--help") {
      fmt::print(
          "usage: loom-kernel-bench [--device cuda|host|host-sim] [-e SIZE] [-n ITERS] "
          "[-d TYPE,...] [-o OP,...]\n");
      std::exit(0);
    }
    if (i + 1 >= argc) throw std::invalid_argument(fmt::format("{} needs a value", f));
    const std::string_view v = argv[++i];
    if (f == "--device") {
      a.device = std::string(v);
    } else if (f == "-e") {
      a.bytes = parse_size(v);
    } else if (f == "-n") {
      a.iters = std::stoi(std::string(v));
    } else if (f == "-d") {
      a.dtypes = parse_list<loom::DataType>(v, loom::parse_dtype);
    } else if (f == "-o") {
      a.ops = parse_list<loom::RedOp>(v, loom::parse_redop);
    } else {
      throw std::invalid_argument(fmt::format("unknown option '{}'", f));
    }
  }
  return a;
}

// Issues one reduce of (dtype, op, out, in, in, count); `finish` waits for those issued.
using ReduceFn =
    std::function<void(loom::DataType, loom::RedOp, void*, const void*, const void*, std::size_t)>;

// Times every (dtype, op) of `a` on the buffers x, y -> z and prints its row.
void sweep(const Args& a, std::string_view where, void* x, void* y, void* z, const ReduceFn& reduce,
           const std::function<void()>& finish) {
  fmt::print(
      "# loom-kernel-bench on {}: {} bytes per buffer, {} iterations; GB/s counts 3 x "
      "bytes (two inputs read, one output written)\n",
      where, a.bytes, a.iters);
  fmt::print("{:>12}  {:>9}  {:>5}  {:>10}  {:>8}\n", "bytes", "type", "op", "time(us)", "GB/s");
  for (loom::DataType t : a.dtypes) {
    const std::size_t count = a.bytes / loom::dtype_size(t);
    for (loom::RedOp op : a.ops) {
      reduce(t, op, z, x, y, count);  // warm-up
      finish();
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < a.iters; ++i) reduce(t, op, z, x, y, count);
      finish();
      const std::chrono::duration<double> el = std::chrono::steady_clock::now() - start;
      const double sec = el.count() / a.iters;
      const double bytes = 3.0 * static_cast<double>(count * loom::dtype_size(t));
      fmt::print("{:>12}  {:>9}  {:>5}  {:>10.1f}  {:>8.1f}\n", count * loom::dtype_size(t),
                 loom::to_string(t), loom::to_string(op), sec * 1e6, bytes / sec / 1e9);
    }
  }
}

// The host kernels on zeroed buffers (no subnormal or NaN lanes to slow any dtype down).
int run_host(const Args& a) {
  std::vector<std::byte> x(a.bytes), y(a.bytes), z(a.bytes);  // value-initialised: zeros
  sweep(
      a, "host (kernels/host)", x.data(), y.data(), z.data(),
      [](loom::DataType t, loom::RedOp op, void* d, const void* p, const void* q, std::size_t n) {
        loom::kernels::reduce(t, op, d, p, q, n);
      },
      [] {});
  return 0;
}

int run_device(const Args& a) {
  loom::device::Device* dev = loom::value_or_throw(loom::device::device_by_name(a.device));
  if (!dev) throw std::invalid_argument("no device runtime");
  loom::device::Stream s = loom::value_or_throw(dev->create_stream());
  void* x = loom::value_or_throw(dev->alloc(a.bytes));
  void* y = loom::value_or_throw(dev->alloc(a.bytes));
  void* z = loom::value_or_throw(dev->alloc(a.bytes));
  const auto deadline = [] { return loom::Deadline::after(std::chrono::minutes(5)); };
  sweep(
      a, dev->name(), x, y, z,
      [&](loom::DataType t, loom::RedOp op, void* d, const void* p, const void* q, std::size_t n) {
        loom::throw_if_error(dev->reduce_async(t, op, d, p, q, n, s));
      },
      [&] { loom::throw_if_error(dev->synchronize(s, deadline())); });
  dev->free(x);
  dev->free(y);
  dev->free(z);
  dev->destroy_stream(s);
  return 0;
}

int run(const Args& a) {
  return a.device == "host" ? run_host(a) : run_device(a);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse_args(argc, argv));
  } catch (const loom::Error& e) {
    fmt::print(stderr, "loom-kernel-bench: {}\n", e.what());
    return 3;
  } catch (const std::exception& e) {
    fmt::print(stderr, "loom-kernel-bench: {}\n", e.what());
    return 2;
  }
}
