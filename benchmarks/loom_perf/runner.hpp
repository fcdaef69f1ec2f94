// loom-perf timing loop: every size x dtype x op, out-of-place then in-place, timed and checked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "benchmarks/loom_perf/device_buffers.hpp"
#include "benchmarks/loom_perf/layout.hpp"
#include "benchmarks/loom_perf/options.hpp"
#include "benchmarks/loom_perf/patterns.hpp"
#include "benchmarks/loom_perf/table.hpp"
#include "loom/communicator.hpp"

namespace loom::perf {

/// A page-aligned, zero-filled (so pre-faulted) host buffer.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  /// A buffer of `bytes`, or an empty one (data() == nullptr) when the memory is not there;
  /// `shared`: from loom::host_alloc (--device host-shared).
  [[nodiscard]] static AlignedBuffer allocate(std::size_t bytes, bool shared) noexcept;
  [[nodiscard]] void* data() const noexcept { return data_.get(); }

 private:
  struct Free {
    bool shared;  // value-initialized (false) by unique_ptr
    void operator()(void* p) const noexcept;
  };
  std::unique_ptr<void, Free> data_;
};

/// Why the sweep of `options` on `nranks` ranks would time nothing (every size from -b to -e is
/// below one element of every dtype, and none is 0), or "" when it has at least one row.
std::string nothing_to_test(const Options& options, int nranks);

class Runner {
 public:
  /// Collective: allocates the send and receive buffers (-e bytes each) on every rank, and
  /// throws std::runtime_error on every rank, naming the rank, buffer and size, when any rank
  /// could not.
  Runner(Communicator& comm, const Options& options);

  /// Runs everything; rank 0 prints the table to stdout. Returns the exit status: 0, or 1 when
  /// any check found wrong elements. Collective errors propagate as loom::Error.
  int run();
  /// Every row measured so far (on every rank; times and checks combined as printed).
  [[nodiscard]] const std::vector<RowResult>& rows() const { return rows_; }
  /// The algorithm every later call forces (Algorithm::Auto: as configured).
  void set_algorithm(Algorithm algorithm) { algorithm_ = algorithm; }
  /// Times (and checks, with -c 1) one row of `bytes` in the first dtype and op of the options,
  /// without printing or recording it. Collective: every rank calls it with the same size.
  [[nodiscard]] RowResult measure(std::size_t bytes);

 private:
  struct Case {
    DataType dtype;
    RedOp op;
    const Pattern* pattern;
    std::size_t count;
    std::size_t bytes;
  };

  void check_allocated();
  [[nodiscard]] std::vector<RankInfo> gather_rank_info();
  [[nodiscard]] std::size_t unit_bytes(DataType dtype) const;
  /// Returns the number of rows run.
  std::size_t run_pattern(DataType dtype, RedOp op, const std::vector<std::size_t>& sizes);
  [[nodiscard]] RowResult run_row(const Case& c);
  [[nodiscard]] HalfResult run_half(const Case& c, bool in_place);
  [[nodiscard]] double time_coll(const Case& c, const Layout& layout);
  [[nodiscard]] std::uint64_t check_coll(const Case& c, const Layout& layout);
  [[nodiscard]] double combine_time(double local_seconds);
  /// The layout the collective is called with: on the device buffers with --device.
  [[nodiscard]] Layout call_layout(const Layout& host) const;
  [[nodiscard]] CollOptions call_options() const;
  void upload_if_device();
  void record(const RowResult& row);
  void plant_error(const Layout& layout, std::size_t elem_size) const;
  void report_mismatch(const Case& c, const Layout& layout, const Pattern::Mismatch& m);

  Communicator& comm_;
  Options options_;
  int rank_;
  int nranks_;
  int root_;  // of rooted collectives; 0 otherwise (the patterns still depend on it)
  AlignedBuffer send_;
  AlignedBuffer recv_;
  std::unique_ptr<DeviceBuffers> device_;  // --device cuda|host-sim
  double busbw_sum_ = 0;
  std::size_t busbw_count_ = 0;
  std::uint64_t total_wrong_ = 0;
  int mismatch_reports_ = 0;
  std::vector<std::string> failed_rows_;
  std::vector<RowResult> rows_;
  Algorithm algorithm_ = Algorithm::Auto;
};

}  // namespace loom::perf
