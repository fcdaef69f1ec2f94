// loom-perf timing loop. See runner.hpp.
#include "benchmarks/loom_perf/runner.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "loom/memory.hpp"

namespace loom::perf {
namespace {

constexpr std::size_t kAlignment = 4096;
constexpr int kMaxMismatchReports = 16;  // per rank, on stderr

// Fixed-size per-rank record for the "# Rank" header lines, exchanged with an allgather.
struct RankRecord {
  std::int32_t rank;
  std::int32_t pid;
  std::array<char, 56> host;
};
static_assert(sizeof(RankRecord) == 64);

void wait_all(std::vector<Work>& works) {
  for (const Work& w : works) w.wait();
  works.clear();
}

std::string describe(Coll coll, DataType dtype, const std::optional<RedOp>& op, std::size_t bytes,
                     bool in_place) {
  return fmt::format("{} {} {} size {} {}", coll_name(coll), dtype_name(dtype),
                     op ? op_name(*op) : std::string_view("none"), bytes,
                     in_place ? "in-place" : "out-of-place");
}

// "256 TiB", "1.5 GiB", "64 KiB", "100 bytes".
std::string human_bytes(std::size_t bytes) {
  constexpr std::array<const char*, 4> kUnits = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int unit = -1;
  while (v >= 1024 && unit + 1 < static_cast<int>(kUnits.size())) {
    v /= 1024;
    ++unit;
  }
  if (unit < 0) return fmt::format("{} bytes", bytes);
  return fmt::format("{:.4g} {}", v, kUnits[static_cast<std::size_t>(unit)]);
}

// Bytes of one element of the size axis: allgather, reduce-scatter, alltoall, gather and
// scatter count one element per rank; alltoallv one unit of its skewed split (n(n+1)/2 elements).
std::size_t unit_of(Coll coll, DataType dtype, int nranks) {
  if (coll == Coll::AllToAllV) return dtype_size(dtype) * alltoallv_units(nranks);
  return dtype_size(dtype) * (per_rank_blocks(coll) ? static_cast<std::size_t>(nranks) : 1);
}

// A size gives a row when it holds one element or more; -b 0 gives a zero-count row.
bool gives_row(std::size_t size, std::size_t unit) {
  return size == 0 || size >= unit;
}

// How the size axis counts elements, for the message of nothing_to_test.
std::string size_note(Coll coll, int nranks) {
  if (nranks <= 1) return {};
  if (coll == Coll::AllToAllV)
    return fmt::format(", alltoallv's sizes count {} elements per unit of its skewed split",
                       alltoallv_units(nranks));
  if (!per_rank_blocks(coll)) return {};
  return fmt::format(", {}'s sizes count the elements of all {} ranks", coll_name(coll), nranks);
}

}  // namespace

std::string nothing_to_test(const Options& options, int nranks) {
  const std::vector<std::size_t> sizes = size_list(options);
  std::string units;
  for (const DataType dtype : options.dtypes) {
    const std::size_t unit = unit_of(options.coll, dtype, nranks);
    for (const std::size_t size : sizes)
      if (gives_row(size, unit)) return {};
    units += fmt::format("{}{} {} bytes", units.empty() ? "" : ", ", dtype_name(dtype), unit);
  }
  return fmt::format(
      "nothing to test: no size from -b {} to -e {} holds one element ({}{}); raise -e",
      options.min_bytes, options.max_bytes, units, size_note(options.coll, nranks));
}

AlignedBuffer AlignedBuffer::allocate(std::size_t bytes, bool shared) noexcept {
  AlignedBuffer b;
  const std::size_t pages = bytes / kAlignment + (bytes % kAlignment != 0 ? 1 : 0);
  const std::size_t rounded = std::max<std::size_t>(pages, 1) * kAlignment;
  void* p = nullptr;
  if (shared) {
    try {
      p = loom::host_alloc(rounded);
    } catch (const loom::Error&) {
      return b;
    }
  } else {
    p = std::aligned_alloc(kAlignment, rounded);
  }
  if (p == nullptr) return b;
  std::memset(p, 0, rounded);
  b.data_ = std::unique_ptr<void, Free>(p, Free{shared});
  return b;
}

void AlignedBuffer::Free::operator()(void* p) const noexcept {
  if (!shared) {
    std::free(p);
    return;
  }
  try {
    loom::host_free(p);
  } catch (const loom::Error&) {  // not ours: cannot happen
  }
}

Runner::Runner(Communicator& comm, const Options& options)
    : comm_(comm),
      options_(options),
      rank_(comm.rank()),
      nranks_(comm.size()),
      root_(is_rooted(options.coll) ? options.root : 0),
      send_(AlignedBuffer::allocate(options.max_bytes, options.device == "host-shared")),
      recv_(send_.data()
                ? AlignedBuffer::allocate(options.max_bytes, options.device == "host-shared")
                : AlignedBuffer()) {
  check_allocated();
  if (options.device != "host" && options.device != "host-shared")
    device_ = std::make_unique<DeviceBuffers>(options.device, options.max_bytes, rank_,
                                              options.default_stream);
}

// Every rank learns whether any could not allocate its buffers, so none waits for a rank that
// gave up; the rank that failed names the buffer and the size.
void Runner::check_allocated() {
  const char* failed = send_.data() == nullptr   ? "send"
                       : recv_.data() == nullptr ? "receive"
                                                 : nullptr;
  std::int32_t mine = failed != nullptr ? rank_ : -1;
  std::int32_t last = -1;
  comm_.allreduce(&mine, &last, 1, DataType::Int32, RedOp::Max).wait();
  if (last < 0) return;
  if (failed != nullptr)
    throw std::runtime_error(fmt::format(
        "rank {}: cannot allocate the {} buffer of {} bytes ({}, set by -e {}): out of host "
        "memory; run with a smaller -e",
        rank_, failed, options_.max_bytes, human_bytes(options_.max_bytes), options_.max_bytes));
  throw std::runtime_error(fmt::format(
      "rank {}: rank {} could not allocate its buffers of {} bytes (-e {}); see its message", rank_,
      last, options_.max_bytes, options_.max_bytes));
}

Layout Runner::call_layout(const Layout& host) const {
  if (!device_) return host;
  Layout l = host;
  auto move = [&](void* p) -> void* {
    if (p == nullptr) return nullptr;
    auto* h = static_cast<std::uint8_t*>(p);
    auto* s = static_cast<std::uint8_t*>(send_.data());
    auto* r = static_cast<std::uint8_t*>(recv_.data());
    if (h >= r && h < r + options_.max_bytes)
      return static_cast<std::uint8_t*>(device_->recv()) + (h - r);
    return static_cast<std::uint8_t*>(device_->send()) + (h - s);
  };
  l.send = move(host.send);
  l.recv = move(host.recv);
  return l;
}

CollOptions Runner::call_options() const {
  CollOptions o = device_ ? device_->options() : CollOptions{};
  o.algorithm = algorithm_;
  return o;
}

std::size_t Runner::unit_bytes(DataType dtype) const {
  return unit_of(options_.coll, dtype, nranks_);
}

RowResult Runner::measure(std::size_t bytes) {
  const DataType dtype = options_.dtypes.front();
  const RedOp op = options_.ops.front();
  const Pattern pattern(dtype, op, nranks_, root_);
  const std::size_t unit = unit_bytes(dtype);
  const std::size_t count = bytes / unit;
  return run_row(Case{dtype, op, &pattern, count, count * unit});
}

void Runner::upload_if_device() {
  if (device_) device_->upload(send_.data(), recv_.data());
}

int Runner::run() {
  const std::vector<RankInfo> ranks = gather_rank_info();
  if (rank_ == 0 && options_.print_rows) print_header(stdout, options_, nranks_, ranks);
  const std::vector<std::size_t> sizes = size_list(options_);
  const std::vector<RedOp> ops =
      has_op(options_.coll) ? options_.ops : std::vector<RedOp>{RedOp::Sum};
  for (const DataType dtype : options_.dtypes) {
    std::size_t rows = 0, defined = 0;
    std::string skipped;
    for (const RedOp op : ops) {
      if (!supports(dtype, op)) {  // bitwise ops on a floating type
        skipped += fmt::format("{}{}", skipped.empty() ? "" : ", ", op_name(op));
        continue;
      }
      ++defined;
      rows += run_pattern(dtype, op, sizes);
    }
    if (!skipped.empty() && rank_ == 0)
      fmt::print(stderr, "loom-perf: {} skipped for {}: integer types only\n", skipped,
                 dtype_name(dtype));
    if (rows == 0 && defined != 0 && rank_ == 0)
      fmt::print(stderr,
                 "loom-perf: {} not tested: no size from -b {} to -e {} holds one of its elements "
                 "({} bytes)\n",
                 dtype_name(dtype), options_.min_bytes, options_.max_bytes, unit_bytes(dtype));
  }
  if (rank_ != 0) return failed_rows_.empty() ? 0 : 1;
  const double avg = busbw_count_ > 0 ? busbw_sum_ / static_cast<double>(busbw_count_) : 0.0;
  if (options_.print_rows) print_footer(stdout, total_wrong_, avg);
  if (failed_rows_.empty()) return 0;
  fmt::print(stderr, "loom-perf: data check FAILED in {} row(s):\n", failed_rows_.size());
  for (const std::string& row : failed_rows_) fmt::print(stderr, "  {}\n", row);
  return 1;
}

std::vector<RankInfo> Runner::gather_rank_info() {
  RankRecord mine{};
  mine.rank = rank_;
  mine.pid = static_cast<std::int32_t>(::getpid());
  std::array<char, 256> host{};
  if (::gethostname(host.data(), host.size() - 1) != 0) std::strcpy(host.data(), "unknown");
  const std::size_t host_len = std::min(strnlen(host.data(), host.size()), mine.host.size() - 1);
  std::memcpy(mine.host.data(), host.data(), host_len);  // mine is zeroed: stays terminated
  std::vector<RankRecord> all(static_cast<std::size_t>(nranks_));
  comm_.allgather(&mine, all.data(), sizeof(RankRecord), DataType::Uint8).wait();
  std::vector<RankInfo> out;
  out.reserve(all.size());
  for (const RankRecord& rec : all) {
    const std::size_t len = strnlen(rec.host.data(), rec.host.size());
    out.push_back(RankInfo{rec.rank, rec.pid, std::string(rec.host.data(), len)});
  }
  return out;
}

std::size_t Runner::run_pattern(DataType dtype, RedOp op, const std::vector<std::size_t>& sizes) {
  const Pattern pattern(dtype, op, nranks_, root_);
  const std::size_t unit = unit_bytes(dtype);
  std::size_t rows = 0;
  for (const std::size_t size : sizes) {
    if (!gives_row(size, unit)) continue;  // too small for this type; -b 0 still gives a row
    const std::size_t count = size / unit;
    const RowResult row = run_row(Case{dtype, op, &pattern, count, count * unit});
    record(row);
    ++rows;
  }
  return rows;
}

RowResult Runner::run_row(const Case& c) {
  RowResult row;
  row.bytes = c.bytes;
  row.count = c.count;
  row.dtype = c.dtype;
  if (has_op(options_.coll)) row.op = c.op;
  row.root = is_rooted(options_.coll) ? root_ : -1;
  if (options_.run_out_of_place) row.out_of_place = run_half(c, false);
  if (options_.run_in_place) row.in_place = run_half(c, true);
  return row;
}

HalfResult Runner::run_half(const Case& c, bool in_place) {
  const Layout layout = make_layout(options_.coll, in_place, send_.data(), recv_.data(), c.count,
                                    dtype_size(c.dtype), rank_, nranks_, root_);
  prepare_buffers(layout, *c.pattern, false);
  upload_if_device();
  HalfResult half;
  half.ran = true;
  half.seconds = time_coll(c, layout);
  set_bandwidth(half, options_.coll, c.bytes, nranks_);
  if (options_.check) half.wrong = check_coll(c, layout);
  return half;
}

double Runner::time_coll(const Case& c, const Layout& host_layout) {
  const Layout layout = call_layout(host_layout);
  const CollOptions opts = call_options();
  std::vector<Work> works;
  works.reserve(static_cast<std::size_t>(std::max(options_.iters, options_.warmup)));
  // --group N: N calls per iteration in one group; the time is per call. The group's last
  // call completes last (its operations run in order), so its Work stands for the group.
  const int per_iter = options_.group;
  auto issue_iteration = [&] {
    if (per_iter == 1) return issue(comm_, layout, c.dtype, c.op, root_, opts);
    comm_.group_start();
    Work last;
    for (int k = 0; k < per_iter; ++k) last = issue(comm_, layout, c.dtype, c.op, root_, opts);
    comm_.group_end();
    return last;
  };
  for (int i = 0; i < options_.warmup; ++i) works.push_back(issue_iteration());
  wait_all(works);
  if (device_) device_->sync();
  comm_.barrier().wait();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < options_.iters; ++i) {
    works.push_back(issue_iteration());
    if (options_.blocking) wait_all(works);
  }
  wait_all(works);
  if (device_) device_->sync();  // the results are on the device: stream work included
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  return combine_time(elapsed.count() / options_.iters / per_iter);
}

double Runner::combine_time(double local_seconds) {
  double in = local_seconds;
  double out = 0;
  RedOp op = RedOp::Sum;
  switch (options_.time_mode) {
    case TimeMode::Rank0: in = rank_ == 0 ? local_seconds : 0.0; break;
    case TimeMode::Average: break;
    case TimeMode::Min: op = RedOp::Min; break;
    case TimeMode::Max: op = RedOp::Max; break;
  }
  comm_.allreduce(&in, &out, 1, DataType::Float64, op).wait();
  return options_.time_mode == TimeMode::Average ? out / nranks_ : out;
}

std::uint64_t Runner::check_coll(const Case& c, const Layout& layout) {
  prepare_buffers(layout, *c.pattern, true);
  upload_if_device();
  issue(comm_, call_layout(layout), c.dtype, c.op, root_, call_options()).wait();
  if (device_) device_->download(send_.data(), recv_.data());
  if (options_.plant_error) plant_error(layout, c.pattern->elem_size());
  const Pattern::Mismatch mismatch = verify_result(layout, *c.pattern);
  if (mismatch.wrong > 0) report_mismatch(c, layout, mismatch);
  std::uint64_t local = mismatch.wrong;
  std::uint64_t total = 0;
  comm_.allreduce(&local, &total, 1, DataType::Uint64, RedOp::Sum).wait();
  return total;
}

void Runner::report_mismatch(const Case& c, const Layout& layout, const Pattern::Mismatch& m) {
  if (++mismatch_reports_ > kMaxMismatchReports) return;
  const std::optional<RedOp> op = has_op(options_.coll) ? std::optional<RedOp>(c.op) : std::nullopt;
  const std::size_t received = result_region(layout).count;
  fmt::print(stderr, "loom-perf: rank {}: {}: {} wrong element(s) of {}, first at index {}\n",
             rank_, describe(options_.coll, c.dtype, op, c.bytes, layout.in_place), m.wrong,
             received, m.first);
}

// --plant-error: one element of the result, on the last rank that receives one (the root of
// reduce and gather), is flipped after the collective, so the check must report exactly 1.
void Runner::plant_error(const Layout& layout, std::size_t elem_size) const {
  const bool rooted_result = options_.coll == Coll::Reduce || options_.coll == Coll::Gather;
  if (rank_ != (rooted_result ? root_ : nranks_ - 1)) return;
  const Region region = result_region(layout);
  if (region.data != nullptr && region.count > 0) invert_bytes(region.data, elem_size);
}

void Runner::record(const RowResult& row) {
  for (const HalfResult* half : {&row.out_of_place, &row.in_place}) {
    if (!half->ran) continue;
    busbw_sum_ += half->busbw;
    ++busbw_count_;
    const std::uint64_t wrong = half->wrong.value_or(0);
    total_wrong_ += wrong;
    if (wrong > 0) {
      failed_rows_.push_back(fmt::format(
          "{}: {} wrong element(s)",
          describe(options_.coll, row.dtype, row.op, row.bytes, half == &row.in_place), wrong));
    }
  }
  rows_.push_back(row);
  if (rank_ != 0 || !options_.print_rows) return;
  fmt::print(stdout, "{}\n", format_row(row));
  std::fflush(stdout);
}

}  // namespace loom::perf
