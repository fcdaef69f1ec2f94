// Shared part of the baseline allreduce benchmarks (mpi-allreduce-perf, gloo-allreduce-perf):
// command line, data pattern, timing loop and the nccl-tests style table that loom-perf prints,
// so benchmarks/compare.py parses all of them alike. Each program supplies a Backend.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "benchmarks/common/sweep.hpp"

namespace loom::baselines {

enum class Dtype { Float32, Float64 };

std::string_view dtype_name(Dtype dtype) noexcept;
std::size_t dtype_size(Dtype dtype) noexcept;

struct Options : bench::SweepOptions {
  std::vector<Dtype> dtypes{Dtype::Float32};
  bool run_out_of_place = true;
  bool run_in_place = true;
  bool help = false;
  std::string store_dir;  // --store-dir (gloo-allreduce-perf only)
};

/// A bad command line: print the message and the usage, exit with status 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Parses the loom-perf flags -b -e -f -i -n -w -c -d -o (sum only), --inplace-only,
/// --outofplace-only, -h; and --store-dir DIR when `with_store_dir`. Throws UsageError.
Options parse_options(int argc, const char* const* argv, bool with_store_dir);
std::string usage_text(std::string_view program, bool with_store_dir);
/// The sizes to run, in bytes, as loom-perf computes them.
using bench::size_list;

/// One rank's "# Rank r Pid p on host" record, exchanged with an allgather.
struct RankRecord {
  std::int32_t rank = 0;
  std::int32_t pid = 0;
  std::array<char, 56> host{};
};
static_assert(sizeof(RankRecord) == 64);
RankRecord my_rank_record(int rank);

/// One half of a table row (out-of-place or in-place), as loom-perf prints it.
struct Half {
  bool ran = false;
  double seconds = 0;
  double algbw = 0;
  double busbw = 0;
  std::uint64_t wrong = 0;
  bool checked = false;
};
/// "  time  algbw  busbw  #wrong" in loom-perf's columns ("N/A" for a half that did not run).
std::string format_half(const Half& half);

/// The first header line: "# program (description): collective on N ranks", and the op and root
/// of the dtype line.
struct TableTitle {
  std::string program;
  std::string description;
  std::string collective;
  std::string op;
  int root = -1;
};
/// loom-perf's header (rank list and column heads) on stdout; one record per rank.
void print_header(const Options& options, const TableTitle& title,
                  const std::vector<RankRecord>& ranks);

/// The communication library under test. All calls are blocking and collective.
class Backend {
 public:
  Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;
  virtual ~Backend() = default;

  [[nodiscard]] virtual int rank() const = 0;
  [[nodiscard]] virtual int size() const = 0;
  /// Shown in the first header line, e.g. "Open MPI v4.1.4".
  [[nodiscard]] virtual std::string description() const = 0;
  /// Sum-allreduce of `count` elements; `in == out` asks for the in-place variant.
  virtual void allreduce(const void* in, void* out, std::size_t count, Dtype dtype) = 0;
  virtual void barrier() = 0;
  /// Sums one value over all ranks (for times and error counts).
  virtual double sum(double value) = 0;
  virtual std::uint64_t sum(std::uint64_t value) = 0;
  /// Every rank's record, in rank order.
  virtual std::vector<RankRecord> allgather(const RankRecord& mine) = 0;
};

/// Exit statuses of the baselines: a bad command line, an error (any exception).
inline constexpr int kExitUsage = 2;
inline constexpr int kExitError = 3;

/// Runs `parse` (which fills the caller's arguments, throws UsageError on a bad command line
/// and returns whether --help was given). Returns the exit status when the program should stop:
/// kExitUsage after a usage error (the message and `usage` on stderr), 0 after --help (`usage`
/// on stdout), printed only where `print` (rank 0); nullopt when it should run.
std::optional<int> parse_or_exit(const std::function<bool()>& parse, bool print,
                                 std::string_view program, const std::string& usage);

/// Runs every size and dtype, printing the table on rank 0. Returns the exit status:
/// 0 when every check passed, 1 when some element was wrong.
int run_benchmark(Backend& backend, const Options& options, std::string_view program);

}  // namespace loom::baselines
