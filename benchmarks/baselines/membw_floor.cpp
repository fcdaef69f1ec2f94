// The memory-system floor for host collectives: single-thread memcpy and fused fp32 c = a + b
// over buffers far larger than the caches (and, for comparison, over a cache-sized working set).
// A shared-memory allreduce can go no faster than the copies and reductions it must do, so these
// two numbers bound loom's and Open MPI's busbw (see docs/performance.md).
//   membw-floor [-s BYTES] [-n ITERS]    (default 256 MiB, 10 iterations; best of the iterations)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::size_t parse_size(const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  std::string suffix = end != nullptr ? end : "";
  double mult = suffix == "K"   ? 1024.0
                : suffix == "M" ? 1048576.0
                : suffix == "G" ? 1073741824.0
                                : 1.0;
  return static_cast<std::size_t>(v * mult);
}

__attribute__((noinline)) void add(float* __restrict c, const float* __restrict a,
                                   const float* __restrict b, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) c[i] = a[i] + b[i];
}

struct Rates {
  double copy_gbs;  // bytes copied per second (each byte read once and written once)
  double add_gbs;   // bytes of c produced per second (3 bytes touched per byte of c)
};

// Best of `iters` passes over `bytes`, cycling through `total` bytes of buffers (so a small
// `bytes` with a large `total` still streams from DRAM; bytes == total keeps it in cache).
Rates measure(std::size_t bytes, int iters) {
  const std::size_t n = bytes / sizeof(float);
  std::vector<float> a(n, 1.0f), b(n, 2.0f), c(n, 0.0f);
  double best_copy = 1e30, best_add = 1e30;
  for (int i = 0; i < iters + 1; ++i) {
    auto t0 = Clock::now();
    std::memcpy(c.data(), a.data(), n * sizeof(float));
    double tc = seconds_since(t0);
    t0 = Clock::now();
    add(c.data(), a.data(), b.data(), n);
    double ta = seconds_since(t0);
    if (i == 0) continue;  // first touch
    best_copy = std::min(best_copy, tc);
    best_add = std::min(best_add, ta);
  }
  if (c[n / 2] != 3.0f) std::fprintf(stderr, "membw-floor: wrong sum\n");
  return {static_cast<double>(bytes) / best_copy / 1e9,
          static_cast<double>(bytes) / best_add / 1e9};
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t bytes = std::size_t{256} << 20;
  int iters = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "-s") == 0)
      bytes = parse_size(argv[i + 1]);
    else if (std::strcmp(argv[i], "-n") == 0)
      iters = std::atoi(argv[i + 1]);
  }
  if (bytes < 4096 || iters < 1) {
    std::fprintf(stderr, "usage: membw-floor [-s BYTES] [-n ITERS]\n");
    return 2;
  }
  Rates dram = measure(bytes, iters);
  Rates cache = measure(std::size_t{256} << 10, iters * 100);
  std::printf("# single thread; GB/s = 1e9 bytes/s; add: fp32 c = a + b, GB/s of c\n");
  std::printf("%-22s %12s %12s\n", "# working set", "memcpy", "fused add");
  std::printf("%-22s %12.2f %12.2f\n", (std::to_string(bytes >> 20) + " MiB (DRAM)").c_str(),
              dram.copy_gbs, dram.add_gbs);
  std::printf("%-22s %12.2f %12.2f\n", "256 KiB (cache)", cache.copy_gbs, cache.add_gbs);
  return 0;
}
