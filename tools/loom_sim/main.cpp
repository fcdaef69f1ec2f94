// loom-sim: predicted time, algbw and busbw of ring, tree and the selector's pick on a modelled
// cluster, in loom-perf's table layout.
//
//   loom-sim allreduce -n 4096 --preset 25gbe -b 8 -e 1G
//
// Exit status: 0 ok, 2 usage error.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.hpp"
#include "core/planner.hpp"
#include "loom/version.hpp"
#include "selector/selector.hpp"
#include "tools/loom_sim/cluster.hpp"
#include "tools/loom_sim/replay.hpp"

namespace {

using loom::select::Coll;

struct Args {
  Coll coll = Coll::AllReduce;
  int nranks = 8;
  std::string preset = "local";
  int per_host = -1;  // -1: the preset's
  int cores = -1;
  std::size_t min_bytes = 8, max_bytes = std::size_t{32} << 20, factor = 2, elem = 4;
  std::size_t chunk = 0, depth = 0;  // 0: from the settings
  std::string tuning;
  double nic_gbps = 0;  // --nic-rate: one network link's rate (0: the preset's network)
  int nics = 1;         // --nics: links per host
  std::size_t nic_burst = std::size_t{1} << 20;  // --nic-burst: their token bucket (loomrun's)
  bool replay = false;  // ring and tree columns from a step-level replay of the real plans
};

constexpr int kUsage = 2;

std::string usage() {
  return "Usage: loom-sim COLLECTIVE [options]\n"
         "  COLLECTIVE: allreduce, allgather, broadcast, reduce, reducescatter\n"
         "  -n, --nranks N       ranks (2..1048576, default 8)\n"
         "  --preset NAME        8gpu-4efa, 25gbe or local (default local: this machine with\n"
         "                       LOOM_TUNING / LOOM_TUNE_* constants)\n"
         "  --per-host N         ranks per host (default: the preset's)\n"
         "  --cores N            CPUs per host (default: the preset's; local: this machine's)\n"
         "  --tuning K=V,...     cost-model constants on top of the preset's\n"
         "  --nic-rate R         each host's network links at R (500mbit, 1gbit: loomrun's\n"
         "                       --nic-rate), as a communicator reads them from the system\n"
         "  --nics K             network links per host (default 1)\n"
         "  --nic-burst SIZE     their token bucket (default 1M, loomrun's; 0: none)\n"
         "  -b, -e, -f           min size, max size (K/M/G), factor (default 8, 32M, 2)\n"
         "  --chunk SIZE, --depth N   pipeline (default LOOM_CHUNK_SIZE, LOOM_PIPELINE_DEPTH)\n"
         "  --replay             ring and tree columns from replaying every rank's real plan in\n"
         "                       simulated time (default: the cost model; replay is exact\n"
         "                       for the schedules but slow beyond a few hundred ranks)\n";
}

[[noreturn]] void fail(const std::string& msg) {
  fmt::print(stderr, "loom-sim: {}\n{}", msg, usage());
  std::exit(kUsage);
}

// A rate as tc writes it (digits, then kbit, mbit or gbit) in GB/s.
double rate_arg(std::string_view flag, std::string_view v) {
  std::size_t digits = 0;
  while (digits < v.size() && v[digits] >= '0' && v[digits] <= '9') ++digits;
  const std::string_view unit = v.substr(digits);
  const double scale = unit == "kbit" ? 1e3 : unit == "mbit" ? 1e6 : unit == "gbit" ? 1e9 : 0;
  auto n = loom::config::parse_int(v.substr(0, digits));
  if (digits == 0 || scale == 0 || !n.is_ok() || *n <= 0)
    fail(fmt::format("bad rate '{}' for {} (expected e.g. 500mbit, 1gbit)", v, flag));
  return static_cast<double>(*n) * scale / 8 / 1e9;
}

std::size_t size_arg(std::string_view flag, const char* v) {
  auto r = loom::config::parse_size(v);
  if (!r.is_ok()) fail(fmt::format("bad size '{}' for {}", v, flag));
  return static_cast<std::size_t>(*r);
}

long int_arg(std::string_view flag, const char* v, long lo, long hi) {
  auto r = loom::config::parse_int(v);
  if (!r.is_ok() || *r < lo || *r > hi)
    fail(fmt::format("bad value '{}' for {} (expected {}..{})", v, flag, lo, hi));
  return static_cast<long>(*r);
}

Args parse(int argc, char** argv) {
  Args a;
  bool have_coll = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view s = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) fail(fmt::format("{} needs a value", s));
      return argv[++i];
    };
    if (s == "-h" || s == "--help") {
      fmt::print("{}", usage());
      std::exit(0);
    } else if (s == "-n" || s == "--nranks")
      a.nranks = static_cast<int>(int_arg(s, value(), 2, 1 << 20));
    else if (s == "--preset")
      a.preset = value();
    else if (s == "--per-host")
      a.per_host = static_cast<int>(int_arg(s, value(), 1, 1 << 20));
    else if (s == "--cores")
      a.cores = static_cast<int>(int_arg(s, value(), 0, 1 << 20));
    else if (s == "--replay")
      a.replay = true;
    else if (s == "--tuning")
      a.tuning = value();
    else if (s == "--nic-rate")
      a.nic_gbps = rate_arg(s, value());
    else if (s == "--nics")
      a.nics = static_cast<int>(int_arg(s, value(), 1, 64));
    else if (s == "--nic-burst")
      a.nic_burst = size_arg(s, value());
    else if (s == "-b" || s == "--minbytes")
      a.min_bytes = size_arg(s, value());
    else if (s == "-e" || s == "--maxbytes")
      a.max_bytes = size_arg(s, value());
    else if (s == "-f" || s == "--stepfactor")
      a.factor = static_cast<std::size_t>(int_arg(s, value(), 2, 1 << 20));
    else if (s == "--chunk")
      a.chunk = size_arg(s, value());
    else if (s == "--depth")
      a.depth = static_cast<std::size_t>(int_arg(s, value(), 1, 64));
    else if (!s.starts_with("-") && !have_coll) {
      const std::pair<std::string_view, Coll> names[] = {
          {"allreduce", Coll::AllReduce},         {"allgather", Coll::AllGather},
          {"broadcast", Coll::Broadcast},         {"reduce", Coll::Reduce},
          {"reducescatter", Coll::ReduceScatter}, {"reduce_scatter", Coll::ReduceScatter}};
      bool found = false;
      for (auto [name, c] : names)
        if (s == name) a.coll = c, found = true;
      if (!found) fail(fmt::format("unknown collective '{}'", s));
      have_coll = true;
    } else {
      fail(fmt::format("unexpected argument '{}'", s));
    }
  }
  if (!have_coll) fail("missing the collective");
  if (a.min_bytes > a.max_bytes) fail("minbytes is larger than maxbytes");
  return a;
}

double bus_factor(Coll c, int n) {
  if (c == Coll::AllReduce) return 2.0 * (n - 1) / n;
  if (c == Coll::AllGather || c == Coll::ReduceScatter) return (n - 1.0) / n;
  return 1.0;
}

std::string cell(double us, std::size_t bytes, double factor) {
  if (us < 0) return fmt::format("  {:>9}  {:>7}  {:>7}", "N/A", "N/A", "N/A");
  double algbw = us > 0 ? static_cast<double>(bytes) / us / 1e3 : 0;
  return fmt::format("  {:9.1f}  {:7.2f}  {:7.2f}", us, algbw, algbw * factor);
}

}  // namespace

namespace {

int run(int argc, char** argv) {
  Args a = parse(argc, argv);
  auto cfg = loom::config::Config::load();
  if (!cfg.is_ok()) fail(cfg.status().message());
  auto local = loom::detail::plan_tuning(*cfg);  // with shm's single-copy threshold
  if (!local.is_ok()) fail(local.status().message());
  const int cores = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  auto cluster = loom::sim::preset(a.preset, *local, cores);
  if (!cluster.is_ok()) fail(cluster.status().message());
  if (a.per_host > 0) cluster->per_host = a.per_host;
  if (a.cores >= 0) cluster->cores = a.cores;
  if (auto st = cluster->tuning.apply(a.tuning); !st.is_ok()) fail(st.message());
  if (a.nic_gbps > 0) {  // what the system states replaces the preset's network
    cluster->tuning.nic_gbps = 0;
    cluster->tuning = loom::select::with_network(cluster->tuning, a.nic_gbps, a.nics,
                                                 static_cast<double>(a.nic_burst));
  }
  const loom::select::Shape shape = loom::sim::shape_of(*cluster, a.nranks);
  auto chunk = loom::select::chunk_from(*cfg);
  if (!chunk.is_ok()) fail(chunk.status().message());
  if (*chunk == 0) *chunk = loom::select::auto_chunk_bytes(cluster->ofi && shape.nhosts > 1);
  loom::select::Pipeline pipe{
      a.chunk ? a.chunk : *chunk,
      a.depth ? a.depth : static_cast<std::size_t>(cfg->get_int("LOOM_PIPELINE_DEPTH"))};
  // The table a communicator of this shape builds at creation.
  const auto table = loom::select::CostTable::build(shape, cluster->tuning, pipe);
  fmt::print("# loom-sim (loom {}): {} on {} ranks ({} hosts x {} ranks), preset {}\n",
             loom::kVersionString, to_string(a.coll), a.nranks, shape.nhosts, shape.per_host,
             cluster->name);
  if (a.replay)
    fmt::print(
        "# ring and tree: step-level replay of every rank's plan; selector: the model's pick\n");
  fmt::print("# {}\n# model: {}; cores per host {}; chunk {} depth {}; tree depth {} edges\n",
             cluster->description, cluster->tuning.to_string(),
             shape.cores ? std::to_string(shape.cores) : std::string("unlimited"), pipe.chunk_bytes,
             pipe.depth, shape.tree_depth);
  fmt::print("# {:>10}  {:>12}  {:^27}  {:^27}  {:^39}  {:>9}  {:>9}  {:>9}\n", "", "", "ring",
             "tree", "selector", "determ.", "hier", "bruck");
  fmt::print(
      "# {:>10}  {:>12}  {:>9}  {:>7}  {:>7}  {:>9}  {:>7}  {:>7}  {:>10}  {:>9}  {:>7}  {:>7}  "
      "{:>9}  {:>9}  {:>9}\n",
      "size", "count", "time", "algbw", "busbw", "time", "algbw", "busbw", "algo", "time", "algbw",
      "busbw", "time", "time", "time");
  fmt::print(
      "# {:>10}  {:>12}  {:>9}  {:>7}  {:>7}  {:>9}  {:>7}  {:>7}  {:>10}  {:>9}  {:>7}  {:>7}  "
      "{:>9}  {:>9}  {:>9}\n",
      "(B)", "(elements)", "(us)", "(GB/s)", "(GB/s)", "(us)", "(GB/s)", "(GB/s)", "", "(us)",
      "(GB/s)", "(GB/s)", "(us)", "(us)", "(us)");
  const double bf = bus_factor(a.coll, a.nranks);
  for (std::size_t bytes = a.min_bytes; bytes <= a.max_bytes; bytes *= a.factor) {
    auto p = loom::sim::predict(a.coll, bytes, table);
    if (a.replay) {  // the schedules' own times; the selector column stays the model's choice
      auto ring =
          loom::sim::replay(a.coll, loom::select::Algo::Ring, bytes, shape, cluster->tuning, pipe);
      if (!ring.is_ok()) fail(ring.status().message());
      p.ring_us = ring->us;
      if (p.tree_us >= 0) {
        auto tree = loom::sim::replay(a.coll, loom::select::Algo::Tree, bytes, shape,
                                      cluster->tuning, pipe);
        if (!tree.is_ok()) fail(tree.status().message());
        p.tree_us = tree->us;
      }
      p.pick_us = p.pick == loom::select::Algo::Tree ? p.tree_us : p.ring_us;
      if (p.pick != loom::select::Algo::Ring && p.pick != loom::select::Algo::Tree) {
        auto other = loom::sim::replay(a.coll, p.pick, bytes, shape, cluster->tuning, pipe);
        if (!other.is_ok()) fail(other.status().message());
        p.pick_us = other->us;
      }
    }
    std::size_t count = bytes / a.elem;
    if (a.coll == Coll::AllGather || a.coll == Coll::ReduceScatter)
      count /= static_cast<std::size_t>(a.nranks);
    auto time = [](double us) {
      return us < 0 ? fmt::format("{:>9}", "N/A") : fmt::format("{:9.1f}", us);
    };
    fmt::print("{:>12}  {:>12}{}{}  {:>10}{}  {}  {}  {}\n", bytes, count,
               cell(p.ring_us, bytes, bf), cell(p.tree_us, bytes, bf), to_string(p.pick),
               cell(p.pick_us, bytes, bf), time(p.det_us), time(p.hier_us), time(p.bruck_us));
    if (bytes == 0) break;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loom-sim: %s\n", e.what());
    return 1;
  }
}
