// loom-perf output. See table.hpp.
#include "benchmarks/loom_perf/table.hpp"

#include <fmt/format.h>

#include "loom/version.hpp"

namespace loom::perf {
namespace {

std::string_view time_mode_name(TimeMode mode) {
  switch (mode) {
    case TimeMode::Rank0: return "rank 0";
    case TimeMode::Average: return "average";
    case TimeMode::Min: return "min";
    case TimeMode::Max: return "max";
  }
  return "?";
}

std::string join_names(const Options& options, bool ops) {
  std::string out;
  const std::size_t n = ops ? options.ops.size() : options.dtypes.size();
  for (std::size_t i = 0; i < n; ++i) {
    if (i > 0) out += ',';
    out += ops ? op_name(options.ops[i]) : dtype_name(options.dtypes[i]);
  }
  return out;
}

// Microseconds with as many decimals as fit in 7 columns.
std::string format_time(double seconds) {
  const double us = seconds * 1e6;
  if (us >= 10000.0) return fmt::format("{:7.0f}", us);
  if (us >= 100.0) return fmt::format("{:7.1f}", us);
  return fmt::format("{:7.2f}", us);
}

std::string format_half(const HalfResult& half) {
  if (!half.ran) return fmt::format("  {:>7}  {:>6}  {:>6}  {:>5}", "N/A", "N/A", "N/A", "N/A");
  const std::string wrong = half.wrong ? fmt::format("{}", *half.wrong) : std::string("N/A");
  return fmt::format("  {}  {:6.2f}  {:6.2f}  {:>5}", format_time(half.seconds), half.algbw,
                     half.busbw, wrong);
}

void print_column_header(std::FILE* out) {
  // Each half (time, algbw, busbw, #wrong) is 32 columns wide.
  fmt::print(out, "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}{:^32}{:^32}\n", "", "", "", "", "",
             "out-of-place", "in-place");
  fmt::print(out,
             "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6} {:>6}  {:>7}  {:>6}  "
             "{:>6} {:>6}\n",
             "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
             "algbw", "busbw", "#wrong");
  fmt::print(out,
             "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>5}  {:>7}  {:>6}  "
             "{:>6}  {:>5}\n",
             "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
             "(GB/s)", "");
}

}  // namespace

double bus_factor(Coll coll, int nranks) {
  const double n = nranks;
  switch (coll) {
    case Coll::AllReduce: return 2.0 * (n - 1) / n;
    case Coll::AllGather:
    case Coll::ReduceScatter:
    case Coll::AllToAll:
    case Coll::AllToAllV:
    case Coll::Gather:
    case Coll::Scatter: return (n - 1) / n;
    case Coll::Broadcast:
    case Coll::Reduce:
    case Coll::SendRecv: return 1.0;  // sendrecv: each rank's bytes cross one link
  }
  return 1.0;
}

void set_bandwidth(HalfResult& half, Coll coll, std::size_t bytes, int nranks) {
  half.algbw = half.seconds > 0 ? static_cast<double>(bytes) / half.seconds / 1e9 : 0.0;
  half.busbw = half.algbw * bus_factor(coll, nranks);
}

void print_header(std::FILE* out, const Options& options, int nranks,
                  const std::vector<RankInfo>& ranks) {
  const bool factor = options.step_bytes == 0;
  fmt::print(out, "# loom-perf (loom {}): {} on {} ranks\n", kVersionString,
             coll_name(options.coll), nranks);
  fmt::print(
      out, "# minBytes {} maxBytes {} step: {}({}) warmup iters: {} iters: {} validation: {}\n",
      options.min_bytes, options.max_bytes, factor ? options.step_factor : options.step_bytes,
      factor ? "factor" : "bytes", options.warmup, options.iters, options.check ? 1 : 0);
  fmt::print(out, "# dtype: {} op: {} root: {} time: {}{}{}\n", join_names(options, false),
             has_op(options.coll) ? join_names(options, true) : std::string("none"),
             is_rooted(options.coll) ? options.root : -1, time_mode_name(options.time_mode),
             options.run_in_place ? (options.run_out_of_place ? "" : " (in-place only)")
                                  : " (out-of-place only)",
             options.blocking ? " blocking" : "");
  fmt::print(out, "#\n# Using ranks\n");
  for (const RankInfo& info : ranks) {
    fmt::print(out, "#  Rank {:2d} Pid {:6d} on {:>10}\n", info.rank, info.pid, info.host);
  }
  fmt::print(out, "#\n");
  print_column_header(out);
  std::fflush(out);
}

std::string format_row(const RowResult& row) {
  const std::string_view op = row.op ? op_name(*row.op) : std::string_view("none");
  return fmt::format("{:>12}  {:>12}  {:>8}  {:>6}  {:>6}", row.bytes, row.count,
                     dtype_name(row.dtype), op, row.root) +
         format_half(row.out_of_place) + format_half(row.in_place);
}

void print_footer(std::FILE* out, std::uint64_t total_wrong, double avg_busbw) {
  fmt::print(out, "# Out of bounds values : {} {}\n", total_wrong, total_wrong ? "FAILED" : "OK");
  fmt::print(out, "# Avg bus bandwidth    : {:.3f}\n", avg_busbw);
  fmt::print(out, "#\n");
  std::fflush(out);
}

}  // namespace loom::perf
