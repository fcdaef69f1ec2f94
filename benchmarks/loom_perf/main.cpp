// loom-perf: bus bandwidth of loom collectives, in the style of nccl-tests.
//
//   loomrun -n 4 loom-perf allreduce -b 8 -e 128M -f 2 -d float -o sum
//
// Exit status: 0 all checks passed, 1 wrong results, 2 usage error (also: no size from -b to -e
// holds one element, so nothing would be tested), 3 loom (or other) error, such as buffers of -e
// bytes that cannot be allocated.
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>
#include <string>
#include <string_view>

#include "benchmarks/loom_perf/calibrate.hpp"
#include "benchmarks/loom_perf/compare.hpp"
#include "benchmarks/loom_perf/compare_algos.hpp"
#include "benchmarks/loom_perf/device_buffers.hpp"
#include "benchmarks/loom_perf/options.hpp"
#include "benchmarks/loom_perf/runner.hpp"
#include "config/config.hpp"
#include "loom/communicator.hpp"
#include "loom/error.hpp"
#include "loom/unique_id.hpp"

namespace {

constexpr int kExitUsage = 2;
constexpr int kExitError = 3;

std::string_view program_name(int argc, char** argv) {
  if (argc < 1 || argv[0] == nullptr) return "loom-perf";
  const std::string_view path = argv[0];
  const std::size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// Joins the launcher's job, or runs as a single rank when no launcher variable is set at all.
// --device cuda|host-sim selects the communicator's device runtime (LOOM_DEVICE) as well;
// --algo and --deterministic set LOOM_ALGO and LOOM_DETERMINISTIC; --transport NAME makes the
// communicator use only that transport (base options from transport_options).
int local_rank_from_launcher() {
  for (const char* name :
       {"LOOM_LOCAL_RANK", "LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK"})
    if (const char* v = std::getenv(name)) {
      auto r = loom::config::parse_int(v);  // the communicator refuses a bad value
      return r.is_ok() && *r >= 0 && *r < loom::config::kMaxRanks ? static_cast<int>(*r) : 0;
    }
  return 0;
}

loom::Communicator join_job(const loom::perf::Options& options, loom::CommOptions co) {
  if (options.device != "host" && options.device != "host-shared") {
    co.settings["LOOM_DEVICE"] = options.device;
    loom::perf::select_device(options.device, local_rank_from_launcher());  // before the comm
  }
  if (!options.algo.empty()) co.settings["LOOM_ALGO"] = options.algo;
  if (options.deterministic) co.deterministic = true;
  for (const char* name : {"LOOM_RANK", "LOOM_WORLD_SIZE", "RANK", "WORLD_SIZE", "SLURM_PROCID",
                           "OMPI_COMM_WORLD_RANK"})
    if (std::getenv(name) != nullptr) return loom::Communicator::from_env(co);
  const loom::UniqueId id = loom::UniqueId::create("127.0.0.1:0");
  return loom::Communicator(id, 0, 1, co);
}

// Every rank leaves together: a launcher stops the job when one rank exits non-zero (a failed
// check exits 1 on every rank), which could kill rank 0 before it printed its last rows.
int leave(loom::Communicator& comm, int status) {
  comm.barrier().wait();
  return status;
}

int sweep(loom::Communicator& comm, const loom::perf::Options& options, bool one_transport) {
  if (options.compare) return loom::perf::run_compare(comm, options);
  if (!options.compare_algos.empty()) return loom::perf::run_compare_algos(comm, options);
  if (one_transport && comm.rank() == 0) fmt::print("# transport: {}\n", options.transports[0]);
  loom::perf::Runner runner(comm, options);
  int status = runner.run();
  if (comm.rank() == 0 && !options.json_file.empty())
    loom::perf::write_json(options.json_file, options, comm.size(),
                           {one_transport ? options.transports[0] : "default"}, {runner.rows()});
  return status;
}

int run(const loom::perf::Options& options, std::string_view program) {
  const bool one_transport = options.transports.size() == 1 && !options.compare;
  loom::Communicator comm =
      join_job(options, one_transport ? loom::perf::transport_options(options.transports[0])
                                      : loom::CommOptions{});
  if (options.calibrate) return loom::perf::calibrate(comm, options);
  if (loom::perf::is_rooted(options.coll) && options.root >= comm.size()) {
    if (comm.rank() == 0) {
      fmt::print(stderr, "{}: root {} is out of range for {} ranks\n", program, options.root,
                 comm.size());
    }
    return leave(comm, kExitUsage);
  }
  if (const std::string why = loom::perf::nothing_to_test(options, comm.size()); !why.empty()) {
    if (comm.rank() == 0) fmt::print(stderr, "{}: {}\n", program, why);
    return leave(comm, kExitUsage);
  }
  return leave(comm, sweep(comm, options, one_transport));
}

}  // namespace

int main(int argc, char** argv) {
  const std::string_view program = program_name(argc, argv);
  loom::perf::Options options;
  try {
    options = loom::perf::parse_options(argc, argv);
  } catch (const loom::perf::UsageError& e) {
    fmt::print(stderr, "{}: {}\n{}", program, e.what(), loom::perf::usage_text(program));
    return kExitUsage;
  }
  if (options.help) {
    fmt::print("{}", loom::perf::usage_text(program));
    return 0;
  }
  try {
    return run(options, program);
  } catch (const loom::Error& e) {
    std::fflush(stdout);
    fmt::print(stderr, "{}: loom error ({}): {}\n", program, loom::to_string(e.code()), e.what());
    return kExitError;
  } catch (const std::bad_alloc&) {
    std::fflush(stdout);
    fmt::print(stderr, "{}: error: out of memory (buffers of -e {} bytes)\n", program,
               options.max_bytes);
    return kExitError;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "{}: error: {}\n", program, e.what());
    return kExitError;
  }
}
