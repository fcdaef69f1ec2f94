// mpi-exchange-perf: MPI_Alltoall, MPI_Alltoallv, MPI_Gather, MPI_Scatter, MPI_Sendrecv,
// MPI_Allgather, MPI_Reduce_scatter_block, MPI_Bcast and MPI_Reduce (fp32/fp64, sums) timed and
// checked like loom-perf, printing loom-perf's table with the same sizes and busbw factors, as
// the baseline of `benchmarks/compare.py --collective alltoall` (and alltoallv, gather, scatter,
// sendrecv, allgather, reducescatter, broadcast, reduce).
//
//   mpirun -np 4 --mca pml ob1 --mca btl vader,self mpi-exchange-perf alltoall -b 64K -e 16M
//
// SIZE, as in loom-perf: alltoall counts a rank's whole send buffer (n blocks), gather and
// scatter the root's buffer (n blocks), alltoallv the bytes every rank sends with the skewed
// split 1 + ((r + p) mod n) units of COUNT elements from rank r to rank p (n(n+1)/2 units in all).
// busbw = algbw x (n-1)/n. sendrecv, as loom-perf's: every rank sends SIZE bytes to the next
// rank and receives the previous rank's (busbw = algbw; out of place only). In place: MPI_IN_PLACE
// (alltoall(v) on every rank, gather's send and scatter's receive on the root; elsewhere gather
// sends from recv + rank x count and scatter receives into send + rank x count, as loom-perf places
// them). allgather and reducescatter count all ranks' blocks (busbw factor (n-1)/n), broadcast
// and reduce one rank's buffer (factor 1). In place: allgather sends from recv + rank x count;
// reducescatter and reduce pass MPI_IN_PLACE with the input in the receive buffer (MPI's form:
// reducescatter's result lands at its start); broadcast is always in place for MPI (the root
// sends from its send buffer, the others receive into their receive buffer). Reductions sum
// small integers, exact in fp32. Exit status: 0 all checks passed, 1 wrong results, 2 usage error,
// 3 other error.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "benchmarks/baselines/common.hpp"
#include "benchmarks/baselines/mpi_main.hpp"

namespace loom::baselines {
namespace {

constexpr std::size_t kAlignment = 4096;

enum class Coll {
  AllToAll,
  AllToAllV,
  Gather,
  Scatter,
  SendRecv,
  AllGather,
  ReduceScatter,
  Broadcast,
  Reduce
};
constexpr std::string_view kCollNames[] = {"alltoall",      "alltoallv", "gather",
                                           "scatter",       "sendrecv",  "allgather",
                                           "reducescatter", "broadcast", "reduce"};

struct Args {
  Coll coll = Coll::AllToAll;
  int root = 0;
  Options options;
};

int to_int(std::size_t v) {
  if (v > static_cast<std::size_t>(INT_MAX)) throw std::runtime_error("count exceeds MPI's int");
  return static_cast<int>(v);
}

// The small integer rank `rank` holds at element `index` of its send buffer: exact in fp32, and a
// block from another rank or another offset differs in most elements.
double value_of(int rank, std::size_t index) {
  const std::uint64_t x = (index * 2654435761ULL + static_cast<std::uint64_t>(rank) * 40503ULL +
                           static_cast<std::uint64_t>(rank) * index) %
                          1021ULL;
  return static_cast<double>(x);
}

std::size_t weight(int rank, int peer, int n) {
  return 1 + static_cast<std::size_t>((rank + peer) % n);
}

std::size_t displ(int rank, int peer, int n, std::size_t unit) {
  std::size_t units = 0;
  for (int q = 0; q < peer; ++q) units += weight(rank, q, n);
  return units * unit;
}

struct FreeDeleter {
  void operator()(void* p) const noexcept { std::free(p); }
};
using Buffer = std::unique_ptr<void, FreeDeleter>;

Buffer allocate(std::size_t bytes) {
  const std::size_t pages = std::max<std::size_t>((bytes + kAlignment - 1) / kAlignment, 1);
  void* p = std::aligned_alloc(kAlignment, pages * kAlignment);
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, pages * kAlignment);
  return Buffer(p);
}

// One call's placement of the data: what MPI is passed and where the checked blocks are.
struct Call {
  void* send = nullptr;
  void* recv = nullptr;
  std::size_t count = 0;  // per block (alltoallv: one unit)
  std::vector<int> counts, displs;
};

class Bench {
 public:
  Bench(const Args& args, int rank, int n)
      : a_(args),
        rank_(rank),
        n_(n),
        send_(allocate(args.options.max_bytes)),
        recv_(allocate(args.options.max_bytes)) {}

  [[nodiscard]] std::size_t unit_elems() const {
    if (a_.coll == Coll::SendRecv || a_.coll == Coll::Broadcast || a_.coll == Coll::Reduce)
      return 1;
    return a_.coll == Coll::AllToAllV ? static_cast<std::size_t>(n_) * (n_ + 1) / 2
                                      : static_cast<std::size_t>(n_);
  }

  Half run_half(Dtype dtype, std::size_t count, bool in_place) {
    const Call c = place(dtype, count, in_place);
    fill(dtype, c, in_place, false);
    Half h;
    h.ran = true;
    for (int i = 0; i < a_.options.warmup; ++i) call(dtype, c, in_place);
    MPI_Barrier(MPI_COMM_WORLD);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < a_.options.iters; ++i) call(dtype, c, in_place);
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    double local = elapsed.count() / a_.options.iters;
    MPI_Allreduce(MPI_IN_PLACE, &local, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    h.seconds = local / n_;
    const double bytes = static_cast<double>(count * unit_elems() * dtype_size(dtype));
    h.algbw = h.seconds > 0 ? bytes / h.seconds / 1e9 : 0.0;
    const bool whole = a_.coll == Coll::SendRecv || a_.coll == Coll::Broadcast ||
                       a_.coll == Coll::Reduce;  // busbw factor 1
    h.busbw = whole ? h.algbw : h.algbw * (n_ - 1) / n_;
    if (!a_.options.check) return h;
    fill(dtype, c, in_place, true);
    call(dtype, c, in_place);
    std::uint64_t wrong = verify(dtype, c);
    MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    h.wrong = wrong;
    h.checked = true;
    return h;
  }

 private:
  [[nodiscard]] unsigned char* at(void* base, std::size_t elems, Dtype d) const {
    return static_cast<unsigned char*>(base) + elems * dtype_size(d);
  }

  Call place(Dtype d, std::size_t count, bool in_place) {
    Call c{send_.get(), recv_.get(), count, {}, {}};
    if (a_.coll == Coll::AllToAllV) {
      for (int p = 0; p < n_; ++p) {
        c.counts.push_back(to_int(count * weight(rank_, p, n_)));
        c.displs.push_back(to_int(displ(rank_, p, n_, count)));
      }
    }
    if (!in_place) return c;
    const auto offset = static_cast<std::size_t>(rank_) * count;
    if (a_.coll == Coll::Gather || a_.coll == Coll::AllGather) c.send = at(recv_.get(), offset, d);
    if (a_.coll == Coll::ReduceScatter || a_.coll == Coll::Reduce) c.recv = c.send;
    if (a_.coll == Coll::Scatter) c.recv = at(send_.get(), offset, d);
    if (a_.coll == Coll::AllToAll || a_.coll == Coll::AllToAllV) c.send = c.recv;
    return c;
  }

  // Block q of this rank's receive buffer: start (elements), length, first element of q's input.
  struct Block {
    std::size_t at, count, first;
  };
  [[nodiscard]] std::vector<Block> recv_blocks(const Call& c) const {
    std::vector<Block> blocks;
    const std::size_t n = c.count;
    const auto r = static_cast<std::size_t>(rank_);
    for (int q = 0; q < n_; ++q) {
      const auto qs = static_cast<std::size_t>(q);
      switch (a_.coll) {
        case Coll::AllToAll: blocks.push_back({qs * n, n, r * n}); break;
        case Coll::AllToAllV:
          blocks.push_back({static_cast<std::size_t>(c.displs[qs]),
                            static_cast<std::size_t>(c.counts[qs]), displ(q, rank_, n_, n)});
          break;
        case Coll::Gather:
        case Coll::AllGather: blocks.push_back({qs * n, n, 0}); break;
        default: break;
      }
    }
    return blocks;
  }

  template <typename T>
  static void put(void* base, std::size_t count, int rank, std::size_t first, bool poison) {
    T* p = static_cast<T*>(base);
    for (std::size_t i = 0; i < count; ++i)
      p[i] = static_cast<T>(poison ? -1.0 : value_of(rank, first + i));  // inputs are >= 0
  }
  static void put(Dtype d, void* base, std::size_t count, int rank, std::size_t first,
                  bool poison) {
    if (d == Dtype::Float32) return put<float>(base, count, rank, first, poison);
    put<double>(base, count, rank, first, poison);
  }

  // Inputs, and with `poison` every element the call must write set to a wrong value first.
  void fill(Dtype d, const Call& c, bool in_place, bool poison) {
    const std::size_t n = c.count;
    const std::size_t all = n * unit_elems();
    const bool root = rank_ == a_.root;
    switch (a_.coll) {
      case Coll::AllToAll:
      case Coll::AllToAllV:
        if (poison && !in_place) put(d, c.recv, all, rank_, 0, true);
        put(d, c.send, all, rank_, 0, false);
        return;
      case Coll::Gather:
        if (poison && root) put(d, c.recv, n * n_, rank_, 0, true);
        put(d, c.send, n, rank_, 0, false);
        return;
      case Coll::Scatter:
        if (poison && (!in_place || !root))
          put(d, c.recv, n, a_.root, static_cast<std::size_t>(rank_) * n, true);
        if (root) put(d, c.send, n * n_, a_.root, 0, false);
        return;
      case Coll::SendRecv:
        if (poison) put(d, c.recv, n, prev(), 0, true);
        put(d, c.send, n, rank_, 0, false);
        return;
      case Coll::AllGather:
        if (poison) put(d, c.recv, n * n_, rank_, 0, true);
        put(d, c.send, n, rank_, 0, false);
        return;
      case Coll::ReduceScatter:
      case Coll::Reduce:
        if (poison && !in_place) put(d, c.recv, n, rank_, 0, true);
        put(d, c.send, all, rank_, 0, false);
        return;
      case Coll::Broadcast:
        if (poison && !root) put(d, c.recv, n, a_.root, 0, true);
        if (root) put(d, c.send, n, a_.root, 0, false);
        return;
    }
  }

  template <typename T>
  static std::uint64_t count_wrong(const void* base, std::size_t count, int rank,
                                   std::size_t first) {
    const T* p = static_cast<const T*>(base);
    std::uint64_t wrong = 0;
    for (std::size_t i = 0; i < count; ++i)
      if (p[i] != static_cast<T>(value_of(rank, first + i))) ++wrong;
    return wrong;
  }
  static std::uint64_t count_wrong(Dtype d, const void* base, std::size_t count, int rank,
                                   std::size_t first) {
    return d == Dtype::Float32 ? count_wrong<float>(base, count, rank, first)
                               : count_wrong<double>(base, count, rank, first);
  }

  // Elements [first, first + count) of every rank's input, summed.
  template <typename T>
  std::uint64_t count_wrong_sum(const void* base, std::size_t count, std::size_t first) const {
    const T* p = static_cast<const T*>(base);
    std::uint64_t wrong = 0;
    for (std::size_t i = 0; i < count; ++i) {
      double sum = 0;
      for (int q = 0; q < n_; ++q) sum += value_of(q, first + i);
      if (p[i] != static_cast<T>(sum)) ++wrong;
    }
    return wrong;
  }

  std::uint64_t verify(Dtype d, const Call& c) {
    const bool f32 = d == Dtype::Float32;
    const auto mine = static_cast<std::size_t>(rank_) * c.count;
    if (a_.coll == Coll::ReduceScatter)
      return f32 ? count_wrong_sum<float>(c.recv, c.count, mine)
                 : count_wrong_sum<double>(c.recv, c.count, mine);
    if (a_.coll == Coll::Reduce) {
      if (rank_ != a_.root) return 0;
      return f32 ? count_wrong_sum<float>(c.recv, c.count, 0)
                 : count_wrong_sum<double>(c.recv, c.count, 0);
    }
    if (a_.coll == Coll::Broadcast)
      return rank_ == a_.root ? 0 : count_wrong(d, c.recv, c.count, a_.root, 0);
    if (a_.coll == Coll::Scatter)
      return count_wrong(d, c.recv, c.count, a_.root, static_cast<std::size_t>(rank_) * c.count);
    if (a_.coll == Coll::SendRecv) return count_wrong(d, c.recv, c.count, prev(), 0);
    if (a_.coll == Coll::Gather && rank_ != a_.root) return 0;
    std::uint64_t wrong = 0;
    const std::vector<Block> blocks = recv_blocks(c);
    for (std::size_t q = 0; q < blocks.size(); ++q)
      wrong += count_wrong(d, at(c.recv, blocks[q].at, d), blocks[q].count, static_cast<int>(q),
                           blocks[q].first);
    return wrong;
  }

  void call(Dtype d, const Call& c, bool in_place) {
    const MPI_Datatype t = d == Dtype::Float32 ? MPI_FLOAT : MPI_DOUBLE;
    const int n = to_int(c.count);
    const bool root = rank_ == a_.root;
    switch (a_.coll) {
      case Coll::AllToAll:
        MPI_Alltoall(in_place ? MPI_IN_PLACE : c.send, n, t, c.recv, n, t, MPI_COMM_WORLD);
        return;
      case Coll::AllToAllV:
        MPI_Alltoallv(in_place ? MPI_IN_PLACE : c.send, c.counts.data(), c.displs.data(), t, c.recv,
                      c.counts.data(), c.displs.data(), t, MPI_COMM_WORLD);
        return;
      case Coll::Gather:
        MPI_Gather(in_place && root ? MPI_IN_PLACE : c.send, n, t, c.recv, n, t, a_.root,
                   MPI_COMM_WORLD);
        return;
      case Coll::Scatter:
        MPI_Scatter(c.send, n, t, in_place && root ? MPI_IN_PLACE : c.recv, n, t, a_.root,
                    MPI_COMM_WORLD);
        return;
      case Coll::SendRecv:
        MPI_Sendrecv(c.send, n, t, (rank_ + 1) % n_, 0, c.recv, n, t, prev(), 0, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        return;
      case Coll::AllGather:
        MPI_Allgather(in_place ? MPI_IN_PLACE : c.send, n, t, c.recv, n, t, MPI_COMM_WORLD);
        return;
      case Coll::ReduceScatter:
        MPI_Reduce_scatter_block(in_place ? MPI_IN_PLACE : c.send, c.recv, n, t, MPI_SUM,
                                 MPI_COMM_WORLD);
        return;
      case Coll::Broadcast:
        MPI_Bcast(root ? c.send : c.recv, n, t, a_.root, MPI_COMM_WORLD);
        return;
      case Coll::Reduce:
        MPI_Reduce(in_place && root ? MPI_IN_PLACE : c.send, c.recv, n, t, MPI_SUM, a_.root,
                   MPI_COMM_WORLD);
        return;
    }
  }

  [[nodiscard]] int prev() const { return (rank_ + n_ - 1) % n_; }

  const Args& a_;
  int rank_;
  int n_;
  Buffer send_;
  Buffer recv_;
};

std::string description() {
  return mpi_library_name();
}

// COLLECTIVE first, then -r/--root N and the baseline flags (parse_options).
Args parse_args(int argc, char** argv) {
  Args a;
  if (argc < 2)
    throw UsageError(
        "missing the collective (alltoall, alltoallv, gather, scatter, sendrecv, allgather, "
        "reducescatter, broadcast, reduce)");
  const std::string_view name = argv[1];
  const auto* it = std::find(std::begin(kCollNames), std::end(kCollNames), name);
  if (name != "-h" && name != "--help") {
    if (it == std::end(kCollNames)) throw UsageError(fmt::format("unknown collective '{}'", name));
    a.coll = static_cast<Coll>(it - std::begin(kCollNames));
  }
  std::vector<const char*> rest{argv[0]};
  for (int i = name == "-h" || name == "--help" ? 1 : 2; i < argc; ++i) {
    const std::string_view arg = argv[i];
    std::string_view value;
    if (arg == "-r" || arg == "--root") {
      if (i + 1 >= argc) throw UsageError(fmt::format("option '{}' needs a value", arg));
      value = argv[++i];
    } else if (arg.starts_with("--root=")) {
      value = arg.substr(7);
    } else if (arg.starts_with("-r") && arg.size() > 2) {
      value = arg.substr(2);
    } else {
      rest.push_back(argv[i]);
      continue;
    }
    char* end = nullptr;
    const std::string v(value);
    const long root = std::strtol(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || root < 0 || root > INT_MAX)
      throw UsageError(fmt::format("invalid root '{}'", value));
    a.root = static_cast<int>(root);
  }
  a.options = parse_options(static_cast<int>(rest.size()), rest.data(), false);
  if (a.coll == Coll::SendRecv) {
    if (!a.options.run_out_of_place)
      throw UsageError("sendrecv has no in-place form (its buffers must not overlap)");
    a.options.run_in_place = false;
  }
  return a;
}

std::string usage(std::string_view program) {
  return fmt::format(
             "Usage: {} COLLECTIVE [-r ROOT] [options]\n  COLLECTIVE: one of {} (sizes "
             "and busbw as loom-perf's: `loom-perf --help`)\n  -r, --root N: the root of "
             "gather, scatter, broadcast and reduce (default 0)\n",
             program, fmt::join(kCollNames, ", ")) +
         usage_text(program, false);
}

int run(int argc, char** argv) {
  int rank = 0;
  int n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const std::string_view program = "mpi-exchange-perf";
  Args a;
  const auto parse = [&] {
    a = parse_args(argc, argv);
    return a.options.help;
  };
  if (const auto status = parse_or_exit(parse, rank == 0, program, usage(program))) return *status;
  const bool rooted = a.coll == Coll::Gather || a.coll == Coll::Scatter ||
                      a.coll == Coll::Broadcast || a.coll == Coll::Reduce;
  if (rooted && a.root >= n) {
    if (rank == 0)
      std::fprintf(stderr, "%s: root %d is out of range for %d ranks\n", program.data(), a.root, n);
    return kExitUsage;
  }
  std::vector<RankRecord> ranks(static_cast<std::size_t>(n));
  const RankRecord mine = my_rank_record(rank);
  MPI_Allgather(&mine, sizeof(RankRecord), MPI_BYTE, ranks.data(), sizeof(RankRecord), MPI_BYTE,
                MPI_COMM_WORLD);
  const std::string coll(kCollNames[static_cast<int>(a.coll)]);
  const int root = rooted ? a.root : -1;
  if (rank == 0)
    print_header(a.options,
                 TableTitle{std::string(program), description() + ", MPI", coll, "none", root},
                 ranks);
  Bench bench(a, rank, n);
  std::uint64_t total_wrong = 0;
  for (const Dtype dtype : a.options.dtypes) {
    const std::size_t unit = bench.unit_elems() * dtype_size(dtype);
    for (const std::size_t size : size_list(a.options)) {
      if (size != 0 && size < unit) continue;  // as loom-perf: below one element per unit
      const std::size_t count = size / unit;
      Half halves[2];
      if (a.options.run_out_of_place) halves[0] = bench.run_half(dtype, count, false);
      if (a.options.run_in_place) halves[1] = bench.run_half(dtype, count, true);
      total_wrong += halves[0].wrong + halves[1].wrong;
      if (rank != 0) continue;
      fmt::print("{:>12}  {:>12}  {:>8}  {:>6}  {:>6}{}{}\n", count * unit, count,
                 dtype_name(dtype), "none", root, format_half(halves[0]), format_half(halves[1]));
      std::fflush(stdout);
    }
  }
  if (rank == 0) {
    fmt::print("# Out of bounds values : {} {}\n#\n", total_wrong, total_wrong ? "FAILED" : "OK");
    std::fflush(stdout);
  }
  return total_wrong == 0 ? 0 : 1;
}

}  // namespace
}  // namespace loom::baselines

int main(int argc, char** argv) {
  return loom::baselines::mpi_main(argc, argv, "mpi-exchange-perf", loom::baselines::run);
}
