// Shared part of the baseline allreduce benchmarks. See common.hpp.
#include "benchmarks/baselines/common.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

namespace loom::baselines {
namespace {

constexpr std::size_t kAlignment = 4096;

// --- Data ----------------------------------------------------------------------------------------

struct FreeDeleter {
  void operator()(void* p) const noexcept { std::free(p); }
};
using Buffer = std::unique_ptr<void, FreeDeleter>;

Buffer allocate(std::size_t bytes) {
  const std::size_t rounded = std::max<std::size_t>((bytes + kAlignment - 1) / kAlignment, 1);
  void* p = std::aligned_alloc(kAlignment, rounded * kAlignment);
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, rounded * kAlignment);  // touch every page before timing
  return Buffer(p);
}

// Rank `rank`'s input at element `index`: a small integer 0..7 from a hash of both, so sums over
// any rank count are exact in float and a misplaced or missing block is caught.
inline int input_value(int rank, std::size_t index) noexcept {
  std::uint64_t x = static_cast<std::uint64_t>(index) * 0x9E3779B97F4A7C15ull +
                    static_cast<std::uint64_t>(rank + 1) * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 29;
  return static_cast<int>(x & 7u);
}

template <typename T>
void fill_typed(void* data, std::size_t count, int rank) {
  T* p = static_cast<T*>(data);
  for (std::size_t i = 0; i < count; ++i) p[i] = static_cast<T>(input_value(rank, i));
}

template <typename T>
std::uint64_t check_typed(const void* data, std::size_t count, int nranks, std::size_t& first) {
  const T* p = static_cast<const T*>(data);
  std::uint64_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) {
    int expected = 0;
    for (int r = 0; r < nranks; ++r) expected += input_value(r, i);
    if (p[i] != static_cast<T>(expected)) {
      if (wrong++ == 0) first = i;
    }
  }
  return wrong;
}

void fill_input(Dtype dtype, void* data, std::size_t count, int rank) {
  if (dtype == Dtype::Float32) return fill_typed<float>(data, count, rank);
  fill_typed<double>(data, count, rank);
}

// -1 everywhere: a sum of the inputs is never negative, so a result not written is caught.
void fill_sentinel(Dtype dtype, void* data, std::size_t count) {
  if (dtype == Dtype::Float32) {
    std::fill_n(static_cast<float*>(data), count, -1.0f);
  } else {
    std::fill_n(static_cast<double*>(data), count, -1.0);
  }
}

std::uint64_t check_result(Dtype dtype, const void* data, std::size_t count, int nranks,
                           std::size_t& first) {
  if (dtype == Dtype::Float32) return check_typed<float>(data, count, nranks, first);
  return check_typed<double>(data, count, nranks, first);
}

// --- Timing --------------------------------------------------------------------------------------

class Runner {
 public:
  Runner(Backend& backend, const Options& options)
      : b_(backend),
        opt_(options),
        send_(allocate(options.max_bytes)),
        recv_(allocate(options.max_bytes)) {}

  Half run_half(Dtype dtype, std::size_t count, bool in_place) {
    void* out = recv_.get();
    const void* in = in_place ? out : send_.get();
    fill_input(dtype, in_place ? out : send_.get(), count, b_.rank());
    Half h;
    h.ran = true;
    for (int i = 0; i < opt_.warmup; ++i) b_.allreduce(in, out, count, dtype);
    b_.barrier();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < opt_.iters; ++i) b_.allreduce(in, out, count, dtype);
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    h.seconds = b_.sum(elapsed.count() / opt_.iters) / b_.size();
    const double bytes = static_cast<double>(count * dtype_size(dtype));
    const double n = b_.size();
    h.algbw = h.seconds > 0 ? bytes / h.seconds / 1e9 : 0.0;
    h.busbw = h.algbw * 2.0 * (n - 1) / n;
    if (!opt_.check) return h;
    // Fresh inputs, one call, every element compared with the exact sum.
    if (!in_place) fill_sentinel(dtype, out, count);
    fill_input(dtype, in_place ? out : send_.get(), count, b_.rank());
    b_.allreduce(in, out, count, dtype);
    std::size_t first = 0;
    const std::uint64_t local = check_result(dtype, out, count, b_.size(), first);
    if (local > 0) {
      std::fprintf(stderr, "rank %d: allreduce %s size %zu %s: %llu wrong element(s), first %zu\n",
                   b_.rank(), std::string(dtype_name(dtype)).c_str(), count * dtype_size(dtype),
                   in_place ? "in-place" : "out-of-place", static_cast<unsigned long long>(local),
                   first);
    }
    h.wrong = b_.sum(local);
    h.checked = true;
    return h;
  }

 private:
  Backend& b_;
  const Options& opt_;
  Buffer send_;
  Buffer recv_;
};

}  // namespace

namespace {

std::string format_time(double seconds) {
  const double us = seconds * 1e6;
  if (us >= 10000.0) return fmt::format("{:7.0f}", us);
  if (us >= 100.0) return fmt::format("{:7.1f}", us);
  return fmt::format("{:7.2f}", us);
}

}  // namespace

std::string format_half(const Half& h) {
  if (!h.ran) return fmt::format("  {:>7}  {:>6}  {:>6}  {:>5}", "N/A", "N/A", "N/A", "N/A");
  const std::string wrong = h.checked ? fmt::format("{}", h.wrong) : std::string("N/A");
  return fmt::format("  {}  {:6.2f}  {:6.2f}  {:>5}", format_time(h.seconds), h.algbw, h.busbw,
                     wrong);
}

void print_header(const Options& opt, const TableTitle& title,
                  const std::vector<RankRecord>& ranks) {
  const bool factor = opt.step_bytes == 0;
  std::string dtypes;
  for (const Dtype d : opt.dtypes) {
    if (!dtypes.empty()) dtypes += ',';
    dtypes += dtype_name(d);
  }
  fmt::print("# {} ({}): {} on {} ranks\n", title.program, title.description, title.collective,
             ranks.size());
  fmt::print("# minBytes {} maxBytes {} step: {}({}) warmup iters: {} iters: {} validation: {}\n",
             opt.min_bytes, opt.max_bytes, factor ? opt.step_factor : opt.step_bytes,
             factor ? "factor" : "bytes", opt.warmup, opt.iters, opt.check ? 1 : 0);
  fmt::print(
      "# dtype: {} op: {} root: {} time: average{}\n", dtypes, title.op, title.root,
      opt.run_in_place ? (opt.run_out_of_place ? "" : " (in-place only)") : " (out-of-place only)");
  fmt::print("#\n# Using ranks\n");
  for (const RankRecord& r : ranks) {
    const std::string host(r.host.data(), strnlen(r.host.data(), r.host.size()));
    fmt::print("#  Rank {:2d} Pid {:6d} on {:>10}\n", r.rank, r.pid, host);
  }
  fmt::print("#\n# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}{:^32}{:^32}\n", "", "", "", "", "",
             "out-of-place", "in-place");
  fmt::print(
      "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6} {:>6}  {:>7}  {:>6}  {:>6} "
      "{:>6}\n",
      "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
      "busbw", "#wrong");
  fmt::print(
      "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>5}  {:>7}  {:>6}  {:>6}  "
      "{:>5}\n",
      "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
      "");
  std::fflush(stdout);
}

RankRecord my_rank_record(int rank) {
  RankRecord rec;
  rec.rank = rank;
  rec.pid = static_cast<std::int32_t>(::getpid());
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "unknown");
  std::memcpy(rec.host.data(), host, std::min(std::strlen(host), rec.host.size() - 1));
  return rec;
}

int run_benchmark(Backend& backend, const Options& options, std::string_view program) {
  const std::vector<RankRecord> ranks = backend.allgather(my_rank_record(backend.rank()));
  const bool root = backend.rank() == 0;
  if (root)
    print_header(options,
                 TableTitle{std::string(program), backend.description(), "allreduce", "sum", -1},
                 ranks);
  Runner runner(backend, options);
  std::uint64_t total_wrong = 0;
  double busbw_sum = 0;
  int busbw_count = 0;
  for (const Dtype dtype : options.dtypes) {
    for (const std::size_t size : size_list(options)) {
      const std::size_t count = size / dtype_size(dtype);
      if (count == 0 && size != 0) continue;
      Half halves[2];
      if (options.run_out_of_place) halves[0] = runner.run_half(dtype, count, false);
      if (options.run_in_place) halves[1] = runner.run_half(dtype, count, true);
      for (const Half& h : halves) {
        if (!h.ran) continue;
        total_wrong += h.wrong;
        busbw_sum += h.busbw;
        ++busbw_count;
      }
      if (!root) continue;
      fmt::print("{:>12}  {:>12}  {:>8}  {:>6}  {:>6}{}{}\n", count * dtype_size(dtype), count,
                 dtype_name(dtype), "sum", -1, format_half(halves[0]), format_half(halves[1]));
      std::fflush(stdout);
    }
  }
  if (root) {
    fmt::print("# Out of bounds values : {} {}\n", total_wrong, total_wrong ? "FAILED" : "OK");
    fmt::print("# Avg bus bandwidth    : {:.3f}\n#\n",
               busbw_count > 0 ? busbw_sum / busbw_count : 0.0);
    std::fflush(stdout);
  }
  return total_wrong == 0 ? 0 : 1;
}

std::optional<int> parse_or_exit(const std::function<bool()>& parse, bool print,
                                 std::string_view program, const std::string& usage) {
  bool help = false;
  try {
    help = parse();
  } catch (const UsageError& e) {
    if (print)
      std::fprintf(stderr, "%s: %s\n%s", std::string(program).c_str(), e.what(), usage.c_str());
    return kExitUsage;
  }
  if (!help) return std::nullopt;
  if (print) std::fputs(usage.c_str(), stdout);
  return 0;
}

}  // namespace loom::baselines
