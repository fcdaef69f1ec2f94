// loom-perf output in the nccl-tests layout, so scripts that parse nccl-tests output work.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "benchmarks/loom_perf/options.hpp"
#include "loom/types.hpp"

namespace loom::perf {

/// One of the two halves of a row: out-of-place or in-place.
struct HalfResult {
  bool ran = false;
  double seconds = 0;                  // per iteration, combined over ranks per -a
  double algbw = 0;                    // GB/s
  double busbw = 0;                    // GB/s
  std::optional<std::uint64_t> wrong;  // summed over ranks; nullopt when not checked
};

struct RowResult {
  std::size_t bytes = 0;  // printed size: count * dtype size (* nranks for allgather/rs,
                          // alltoall, gather, scatter; * n(n+1)/2 for alltoallv)
  std::size_t count = 0;  // per-rank count, as passed to the collective (alltoallv: one unit)
  DataType dtype = DataType::Float32;
  std::optional<RedOp> op;  // nullopt: "none"
  int root = -1;            // -1 for collectives without a root
  HalfResult out_of_place;
  HalfResult in_place;
};

struct RankInfo {
  int rank = 0;
  int pid = 0;
  std::string host;
};

/// Bus bandwidth factor of nccl-tests: allreduce 2(n-1)/n; allgather, reduce-scatter, alltoall,
/// gather and scatter (n-1)/n (alltoallv too, by the alltoall convention); broadcast and reduce 1.
double bus_factor(Coll coll, int nranks);
/// Fills algbw and busbw of `half` from its time and the row's byte count.
void set_bandwidth(HalfResult& half, Coll coll, std::size_t bytes, int nranks);

void print_header(std::FILE* out, const Options& options, int nranks,
                  const std::vector<RankInfo>& ranks);
/// The 13 whitespace-separated fields of one row (no newline).
std::string format_row(const RowResult& row);
void print_footer(std::FILE* out, std::uint64_t total_wrong, double avg_busbw);

}  // namespace loom::perf
