// loom-perf command line: the collective to run and nccl-tests style flags.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "benchmarks/common/sweep.hpp"
#include "loom/options.hpp"
#include "loom/types.hpp"

namespace loom::perf {

enum class Coll {
  AllReduce,
  AllGather,
  Broadcast,
  Reduce,
  ReduceScatter,
  AllToAll,
  AllToAllV,
  Gather,
  Scatter,
  SendRecv,  // each rank sends to the next and receives from the previous (sendrecv)
};

// Names, in nccl-tests spelling.

/// "int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "bfloat16", "float", "double",
/// "f8e4m3", "f8e5m2".
std::string_view dtype_name(DataType dtype) noexcept;
/// "sum", "prod", "min", "max", "avg".
std::string_view op_name(RedOp op) noexcept;
/// Accepts the names above and the aliases fp16, float16, bf16, fp32, float32, f32, fp64,
/// float64, f64, int, char, uint, fp8_e4m3, e4m3, fp8_e5m2, e5m2.
std::optional<DataType> dtype_from_name(std::string_view name) noexcept;
std::optional<RedOp> op_from_name(std::string_view name) noexcept;
/// "allreduce", "allgather", "broadcast", "reduce", "reducescatter" (also "reduce_scatter"),
/// "alltoall", "alltoallv", "gather", "scatter".
std::string_view coll_name(Coll coll) noexcept;
std::optional<Coll> coll_from_name(std::string_view name) noexcept;
/// --compare-algos names: the selector catalog's (ring, tree, rd, hier, bruck) and "auto" (nullopt
/// for anything else).
std::optional<Algorithm> algorithm_from_name(std::string_view name) noexcept;
/// Broadcast, reduce, gather and scatter take a root.
constexpr bool is_rooted(Coll c) noexcept {
  return c == Coll::Broadcast || c == Coll::Reduce || c == Coll::Gather || c == Coll::Scatter;
}
/// Allreduce, reduce and reduce-scatter take a reduction operator.
constexpr bool has_op(Coll c) noexcept {
  return c == Coll::AllReduce || c == Coll::Reduce || c == Coll::ReduceScatter;
}
/// The size axis counts the elements of all ranks: allgather, reduce-scatter, alltoall, gather
/// and scatter (nccl-tests' convention; alltoallv has its own unit, see unit_of in runner.cpp).
constexpr bool per_rank_blocks(Coll c) noexcept {
  return c == Coll::AllGather || c == Coll::ReduceScatter || c == Coll::AllToAll ||
         c == Coll::Gather || c == Coll::Scatter;
}
/// alltoallv's skewed split: rank r sends 1 + ((r + p) mod n) units to rank p (symmetric, so
/// every rank sends and receives n(n+1)/2 units in all).
constexpr std::size_t alltoallv_weight(int rank, int peer, int nranks) noexcept {
  return 1 + static_cast<std::size_t>((rank + peer) % nranks);
}
constexpr std::size_t alltoallv_units(int nranks) noexcept {
  const auto n = static_cast<std::size_t>(nranks);
  return n * (n + 1) / 2;
}

/// How per-rank times combine into the reported time (-a).
enum class TimeMode { Rank0 = 0, Average = 1, Min = 2, Max = 3 };

struct Options : bench::SweepOptions {
  Coll coll = Coll::AllReduce;
  std::vector<DataType> dtypes{DataType::Float32};
  std::vector<RedOp> ops{RedOp::Sum};
  int root = 0;
  TimeMode time_mode = TimeMode::Average;
  bool blocking = false;  // -z 1: wait for each call before the next, like a training loop
  bool run_out_of_place = true;
  bool run_in_place = true;
  bool help = false;
  std::string algo;            // --algo: LOOM_ALGO for the communicator ("" = as configured)
  bool deterministic = false;  // --deterministic
  bool calibrate = false;      // --calibrate: measure the cost model's constants instead
  /// Where the buffers live: "host", "cuda" or "host-sim" (--device).
  std::string device = "host";
  /// --stream default: device calls on the device's default (legacy) stream, not one of their own.
  bool default_stream = false;
  // Transports: --transport NAME runs over that one; --compare-transports A,B[,C] runs the same
  // sweep over each and prints one table with a busbw column per transport.
  std::vector<std::string> transports;
  bool compare = false;
  // --compare-algos A,B[,C...]: each size timed with each algorithm (per call) in turn, --rounds
  // times, on one communicator; one table of median times.
  std::vector<std::string> compare_algos;
  int rounds = 5;
  std::string json_file;     // --json FILE: every row as JSON
  bool plant_error = false;  // --plant-error: flip one received element before each check
  /// --group N: each timed iteration issues N calls inside one group (group_start/group_end);
  /// the time reported is per call.
  int group = 1;
  bool print_rows = true;  // internal: the compare mode prints its own table
};

/// A bad command line; main prints the message and the usage and exits with status 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Parses argv (argv[0] is the program). Throws UsageError.
Options parse_options(int argc, const char* const* argv);
/// "8", "1K", "32M", "1G" (powers of 1024; a trailing "B" is allowed). nullopt when malformed.
using bench::parse_size;
/// The sizes to run, in bytes: min, then growing by the factor (or step) while <= max.
using bench::size_list;
std::string usage_text(std::string_view program);

}  // namespace loom::perf
