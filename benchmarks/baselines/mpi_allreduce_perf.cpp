// mpi-allreduce-perf: MPI_Allreduce (fp32/fp64 sum) timed and checked like loom-perf, printing
// loom-perf's table, as a baseline for benchmarks/compare.py.
//
//   mpirun -np 4 --mca btl vader,self mpi-allreduce-perf -b 8 -e 256M -f 4 -n 20 -w 5
//
// Out-of-place passes separate buffers; in-place passes MPI_IN_PLACE. Exit status: 0 all checks
// passed, 1 wrong results, 2 usage error, 3 other error.
#include <mpi.h>

#include <climits>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "benchmarks/baselines/common.hpp"
#include "benchmarks/baselines/mpi_main.hpp"

namespace loom::baselines {
namespace {

MPI_Datatype mpi_type(Dtype dtype) {
  return dtype == Dtype::Float32 ? MPI_FLOAT : MPI_DOUBLE;
}

class MpiBackend final : public Backend {
 public:
  MpiBackend() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }

  [[nodiscard]] int rank() const override { return rank_; }
  [[nodiscard]] int size() const override { return size_; }

  [[nodiscard]] std::string description() const override {
    return mpi_library_name() + ", MPI_Allreduce";
  }

  void allreduce(const void* in, void* out, std::size_t count, Dtype dtype) override {
    if (count > static_cast<std::size_t>(INT_MAX)) {
      throw std::runtime_error("count does not fit MPI's int count");
    }
    const void* send = in == out ? MPI_IN_PLACE : in;
    MPI_Allreduce(send, out, static_cast<int>(count), mpi_type(dtype), MPI_SUM, MPI_COMM_WORLD);
  }

  void barrier() override { MPI_Barrier(MPI_COMM_WORLD); }

  double sum(double value) override {
    double out = 0;
    MPI_Allreduce(&value, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return out;
  }

  std::uint64_t sum(std::uint64_t value) override {
    std::uint64_t out = 0;
    MPI_Allreduce(&value, &out, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    return out;
  }

  std::vector<RankRecord> allgather(const RankRecord& mine) override {
    std::vector<RankRecord> all(static_cast<std::size_t>(size_));
    MPI_Allgather(&mine, sizeof(RankRecord), MPI_BYTE, all.data(), sizeof(RankRecord), MPI_BYTE,
                  MPI_COMM_WORLD);
    return all;
  }

 private:
  int rank_ = 0;
  int size_ = 1;
};

std::string_view program_name(int argc, char** argv) {
  if (argc < 1 || argv[0] == nullptr) return "mpi-allreduce-perf";
  const std::string_view path = argv[0];
  const std::size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

int run(int argc, char** argv) {
  const std::string_view program = program_name(argc, argv);
  MpiBackend backend;
  Options options;
  const auto parse = [&] {
    options = parse_options(argc, argv, false);
    return options.help;
  };
  if (const auto status =
          parse_or_exit(parse, backend.rank() == 0, program, usage_text(program, false))) {
    return *status;
  }
  return run_benchmark(backend, options, program);
}

}  // namespace
}  // namespace loom::baselines

int main(int argc, char** argv) {
  return loom::baselines::mpi_main(argc, argv, "mpi-allreduce-perf", loom::baselines::run);
}
