#include "benchmarks/loom_perf/compare_algos.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "benchmarks/loom_perf/runner.hpp"
#include "benchmarks/loom_perf/table.hpp"

namespace loom::perf {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

const HalfResult& timed_half(const RowResult& row) {
  return row.out_of_place.ran ? row.out_of_place : row.in_place;
}

std::uint64_t wrong_of(const RowResult& row) {
  return row.out_of_place.wrong.value_or(0) + row.in_place.wrong.value_or(0);
}

void print_head(const Options& options, int nranks) {
  fmt::print(
      "# loom-perf {}: {} ranks, algorithms timed in turn at each size (median of {} rounds, "
      "{} time in us, dtype {}{}; every result verified: #wrong summed)\n",
      coll_name(options.coll), nranks, options.rounds,
      options.run_out_of_place ? "out-of-place" : "in-place", dtype_name(options.dtypes.front()),
      has_op(options.coll) ? fmt::format(", op {}", op_name(options.ops.front())) : "");
  std::string head = fmt::format("#{:>12} {:>12} {:>8}", "size", "count", "type");
  for (const std::string& a : options.compare_algos) head += fmt::format(" {:>10}", a);
  head += fmt::format(" {:>8}", "fastest");
  const bool has_auto = std::count(options.compare_algos.begin(), options.compare_algos.end(),
                                   std::string("auto")) > 0;
  if (has_auto) head += fmt::format(" {:>13}", "auto/fastest");
  fmt::print("{} {:>7}\n", head, "#wrong");
}

}  // namespace

int run_compare_algos(Communicator& comm, const Options& options) {
  Options quiet = options;
  quiet.print_rows = false;
  Runner runner(comm, quiet);
  const std::vector<std::string>& names = options.compare_algos;
  if (comm.rank() == 0) print_head(options, comm.size());
  std::uint64_t total_wrong = 0;
  for (const std::size_t size : size_list(options)) {
    std::vector<std::vector<double>> times(names.size());
    std::uint64_t wrong = 0;
    RowResult last;
    for (int round = 0; round < options.rounds; ++round) {
      for (std::size_t a = 0; a < names.size(); ++a) {
        runner.set_algorithm(*algorithm_from_name(names[a]));
        last = runner.measure(size);
        times[a].push_back(timed_half(last).seconds * 1e6);
        wrong += wrong_of(last);
      }
    }
    total_wrong += wrong;
    if (comm.rank() != 0) continue;
    std::string line =
        fmt::format(" {:>12} {:>12} {:>8}", last.bytes, last.count, dtype_name(last.dtype));
    std::size_t fastest = names.size();
    std::vector<double> med(names.size());
    for (std::size_t a = 0; a < names.size(); ++a) {
      med[a] = median(times[a]);
      line += fmt::format(" {:>10.2f}", med[a]);
      if (names[a] != "auto" && (fastest == names.size() || med[a] < med[fastest])) fastest = a;
    }
    line += fmt::format(" {:>8}", fastest < names.size() ? names[fastest] : "-");
    const auto is_auto = std::find(names.begin(), names.end(), "auto");
    if (is_auto != names.end()) {
      const double a = med[static_cast<std::size_t>(is_auto - names.begin())];
      line += fastest < names.size() && med[fastest] > 0
                  ? fmt::format(" {:>12.1f}%", (a / med[fastest] - 1) * 100)
                  : fmt::format(" {:>13}", "-");
    }
    fmt::print("{} {:>7}\n", line, wrong);
    std::fflush(stdout);
  }
  if (comm.rank() == 0)
    fmt::print("# Out of bounds values : {} {}\n", total_wrong, total_wrong == 0 ? "OK" : "FAILED");
  return total_wrong == 0 ? 0 : 1;
}

}  // namespace loom::perf
