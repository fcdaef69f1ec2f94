// loom-perf command line parsing. See options.hpp.
#include "benchmarks/loom_perf/options.hpp"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <charconv>
#include <limits>

#include "selector/catalog.hpp"

namespace loom::perf {
namespace {

struct FlagSpec {
  char key;  // short name; long-only flags use an upper-case key not accepted as a short flag
  std::string_view long_name;
  bool takes_value;
  bool has_short;
};

constexpr std::array<FlagSpec, 27> kFlags = {{
    {'b', "minbytes", true, true},
    {'e', "maxbytes", true, true},
    {'f', "stepfactor", true, true},
    {'i', "stepbytes", true, true},
    {'n', "iters", true, true},
    {'w', "warmup_iters", true, true},
    {'c', "check", true, true},
    {'d', "datatype", true, true},
    {'o', "op", true, true},
    {'r', "root", true, true},
    {'a', "average", true, true},
    {'z', "blocking", true, true},
    {'h', "help", false, true},
    {'I', "inplace-only", false, false},
    {'O', "outofplace-only", false, false},
    {'A', "algo", true, false},
    {'C', "calibrate", false, false},
    {'R', "deterministic", false, false},
    {'D', "device", true, false},
    {'S', "stream", true, false},
    {'T', "transport", true, false},
    {'K', "compare-transports", true, false},
    {'J', "json", true, false},
    {'G', "compare-algos", true, false},
    {'N', "rounds", true, false},
    {'P', "plant-error", false, false},
    {'g', "group", true, true},
}};

constexpr std::array<std::string_view, kNumDataTypes> kDtypeNames = {
    "int8", "uint8",    "int32", "uint32", "int64",  "uint64",
    "half", "bfloat16", "float", "double", "f8e4m3", "f8e5m2"};
constexpr std::array<std::string_view, kNumRedOps> kOpNames = {
    "sum", "prod", "min", "max", "avg", "mulsum", "band", "bor", "bxor"};  // nccl-tests: mulsum

struct Alias {
  std::string_view name;
  DataType dtype;
};
constexpr std::array<Alias, 16> kDtypeAliases = {{
    {"char", DataType::Int8},
    {"int", DataType::Int32},
    {"uint", DataType::Uint32},
    {"fp16", DataType::Float16},
    {"float16", DataType::Float16},
    {"bf16", DataType::BFloat16},
    {"fp32", DataType::Float32},
    {"float32", DataType::Float32},
    {"f32", DataType::Float32},
    {"fp64", DataType::Float64},
    {"float64", DataType::Float64},
    {"f64", DataType::Float64},
    {"fp8_e4m3", DataType::Float8E4M3},
    {"e4m3", DataType::Float8E4M3},
    {"fp8_e5m2", DataType::Float8E5M2},
    {"e5m2", DataType::Float8E5M2},
}};

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

struct CollName {
  std::string_view name;
  Coll coll;
};
constexpr std::array<CollName, 15> kCollNames = {{
    {"allreduce", Coll::AllReduce},
    {"allgather", Coll::AllGather},
    {"broadcast", Coll::Broadcast},
    {"reduce", Coll::Reduce},
    {"reducescatter", Coll::ReduceScatter},
    {"reduce_scatter", Coll::ReduceScatter},
    {"all_reduce", Coll::AllReduce},
    {"all_gather", Coll::AllGather},
    {"alltoall", Coll::AllToAll},
    {"alltoallv", Coll::AllToAllV},
    {"gather", Coll::Gather},
    {"scatter", Coll::Scatter},
    {"all_to_all", Coll::AllToAll},
    {"all_to_allv", Coll::AllToAllV},
    {"sendrecv", Coll::SendRecv},
}};

const FlagSpec* find_flag(std::string_view name, bool is_long) {
  for (const FlagSpec& spec : kFlags) {
    if (is_long ? name == spec.long_name
                : (spec.has_short && name.size() == 1 && name[0] == spec.key)) {
      return &spec;
    }
  }
  return nullptr;
}

long long parse_int(std::string_view flag, std::string_view text, long long lo, long long hi) {
  return bench::int_value<UsageError>(flag, text, lo, hi);
}

std::size_t parse_size_flag(std::string_view flag, std::string_view text) {
  return bench::size_value<UsageError>(flag, text);
}

template <typename T, typename Parse>
std::vector<T> parse_list(std::string_view flag, std::string_view text, int all_count,
                          Parse parse) {
  std::vector<T> out;
  if (text == "all") {
    for (int i = 0; i < all_count; ++i) out.push_back(static_cast<T>(i));
    return out;
  }
  while (true) {
    const std::size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    const std::optional<T> value = parse(item);
    if (!value) throw UsageError(fmt::format("unknown value '{}' for {}", item, flag));
    out.push_back(*value);
    if (comma == std::string_view::npos) return out;
    text.remove_prefix(comma + 1);
  }
}

void apply_flag(Options& opt, const FlagSpec& spec, std::string_view value) {
  constexpr long long kIntMax = std::numeric_limits<int>::max();
  const std::string flag =
      spec.has_short ? fmt::format("-{}", spec.key) : fmt::format("--{}", spec.long_name);
  switch (spec.key) {
    case 'b': opt.min_bytes = parse_size_flag(flag, value); break;
    case 'e': opt.max_bytes = parse_size_flag(flag, value); break;
    case 'f':
      opt.step_factor = static_cast<std::size_t>(parse_int(flag, value, 2, 1 << 20));
      opt.step_bytes = 0;
      break;
    case 'i':
      opt.step_bytes = parse_size_flag(flag, value);
      if (opt.step_bytes == 0) throw UsageError("-i needs a step of at least 1 byte");
      break;
    case 'n': opt.iters = static_cast<int>(parse_int(flag, value, 1, kIntMax)); break;
    case 'w': opt.warmup = static_cast<int>(parse_int(flag, value, 0, kIntMax)); break;
    case 'c': opt.check = parse_int(flag, value, 0, kIntMax) != 0; break;
    case 'd': opt.dtypes = parse_list<DataType>(flag, value, kNumDataTypes, dtype_from_name); break;
    case 'o': opt.ops = parse_list<RedOp>(flag, value, kNumRedOps, op_from_name); break;
    case 'r': opt.root = static_cast<int>(parse_int(flag, value, 0, kIntMax)); break;
    case 'a': opt.time_mode = static_cast<TimeMode>(parse_int(flag, value, 0, 3)); break;
    case 'z': opt.blocking = parse_int(flag, value, 0, 1) == 1; break;
    case 'h': opt.help = true; break;
    case 'I': opt.run_out_of_place = false; break;
    case 'O': opt.run_in_place = false; break;
    case 'A': opt.algo = std::string(value); break;
    case 'C': opt.calibrate = true; break;
    case 'R': opt.deterministic = true; break;
    case 'D':
      if (value != "host" && value != "host-shared" && value != "cuda" && value != "host-sim")
        throw UsageError(fmt::format(
            "unknown device '{}' for --device (host, host-shared, cuda, host-sim)", value));
      opt.device = std::string(value);
      break;
    case 'S':
      if (value != "own" && value != "default")
        throw UsageError(fmt::format("unknown stream '{}' for --stream (own, default)", value));
      opt.default_stream = value == "default";
      break;
    case 'T':
    case 'K': {
      opt.transports.clear();
      for (std::string_view rest = value; !rest.empty();) {
        const std::size_t comma = rest.find(',');
        const std::string_view name = rest.substr(0, comma);
        if (name != "tcp" && name != "shm" && name != "ofi")
          throw UsageError(
              fmt::format("unknown transport '{}' for {} (tcp, shm, ofi)", name, flag));
        opt.transports.emplace_back(name);
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      }
      if (opt.transports.empty()) throw UsageError(fmt::format("{} needs a transport", flag));
      if (spec.key == 'T' && opt.transports.size() != 1)
        throw UsageError("--transport takes one transport; use --compare-transports for several");
      opt.compare = spec.key == 'K';
      break;
    }
    case 'J': opt.json_file = value; break;
    case 'G': {
      opt.compare_algos.clear();
      for (std::string_view rest = value; !rest.empty();) {
        const std::size_t comma = rest.find(',');
        const std::string_view name = rest.substr(0, comma);
        if (!algorithm_from_name(name))
          throw UsageError(fmt::format("unknown algorithm '{}' for {} ({}, auto)", name, flag,
                                       select::algo_names()));
        opt.compare_algos.emplace_back(name);
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      }
      if (opt.compare_algos.empty()) throw UsageError(fmt::format("{} needs an algorithm", flag));
      break;
    }
    case 'N': opt.rounds = static_cast<int>(parse_int(flag, value, 1, 1000)); break;
    case 'P': opt.plant_error = true; break;
    case 'g': opt.group = static_cast<int>(parse_int(flag, value, 1, 4096)); break;
    default: break;
  }
}

// Splits one argument into a flag spec and its inline value ("-b8", "--minbytes=8").
const FlagSpec& split_flag(std::string_view arg, std::optional<std::string_view>& inline_value) {
  const bool is_long = arg.starts_with("--");
  std::string_view name = arg.substr(is_long ? 2 : 1);
  if (is_long) {
    if (const std::size_t eq = name.find('='); eq != std::string_view::npos) {
      inline_value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
  } else if (name.size() > 1) {
    inline_value = name.substr(1);
    name = name.substr(0, 1);
  }
  const FlagSpec* spec = find_flag(name, is_long);
  if (spec == nullptr) throw UsageError(fmt::format("unknown option '{}'", arg));
  return *spec;
}

void validate(const Options& opt) {
  if (opt.min_bytes > opt.max_bytes) {
    throw UsageError(
        fmt::format("minbytes ({}) is larger than maxbytes ({})", opt.min_bytes, opt.max_bytes));
  }
  if (!opt.run_in_place && !opt.run_out_of_place) {
    throw UsageError("--inplace-only and --outofplace-only exclude each other");
  }
  if (opt.default_stream && opt.device != "cuda" && opt.device != "host-sim")
    throw UsageError("--stream default needs --device cuda or host-sim");
  if (opt.coll == Coll::SendRecv && !opt.run_out_of_place)
    throw UsageError("sendrecv has no in-place form (its buffers must not overlap)");
  if (!opt.compare_algos.empty() && (opt.compare || !opt.algo.empty() || opt.calibrate))
    throw UsageError("--compare-algos excludes --compare-transports, --algo and --calibrate");
  const bool exchange = opt.coll == Coll::AllToAll || opt.coll == Coll::AllToAllV ||
                        opt.coll == Coll::Gather || opt.coll == Coll::Scatter ||
                        opt.coll == Coll::SendRecv;
  if (!opt.compare_algos.empty() && exchange)
    throw UsageError(
        fmt::format("--compare-algos: {} has one algorithm (pairwise exchange or "
                    "flat rooted), nothing to compare",
                    coll_name(opt.coll)));
}

}  // namespace

std::optional<Algorithm> algorithm_from_name(std::string_view name) noexcept {
  if (name == "auto") return Algorithm::Auto;
  const select::AlgoRow* row = select::find_row(name);
  if (row == nullptr || !row->by_cost) return std::nullopt;
  return coll::hint_for(row->algo);
}

std::string_view dtype_name(DataType dtype) noexcept {
  const auto i = static_cast<std::size_t>(dtype);
  return i < kDtypeNames.size() ? kDtypeNames[i] : std::string_view("unknown");
}

std::string_view op_name(RedOp op) noexcept {
  const auto i = static_cast<std::size_t>(op);
  return i < kOpNames.size() ? kOpNames[i] : std::string_view("unknown");
}

std::optional<DataType> dtype_from_name(std::string_view name) noexcept {
  const std::string key = lower(name);
  for (std::size_t i = 0; i < kDtypeNames.size(); ++i) {
    if (key == kDtypeNames[i]) return static_cast<DataType>(i);
  }
  for (const Alias& alias : kDtypeAliases) {
    if (key == alias.name) return alias.dtype;
  }
  return std::nullopt;
}

std::optional<RedOp> op_from_name(std::string_view name) noexcept {
  const std::string key = lower(name);
  for (std::size_t i = 0; i < kOpNames.size(); ++i) {
    if (key == kOpNames[i]) return static_cast<RedOp>(i);
  }
  return parse_redop(key);  // loom's names and aliases too ("premul_sum", "xor", ...)
}

std::string_view coll_name(Coll coll) noexcept {
  for (const CollName& entry : kCollNames) {
    if (entry.coll == coll) return entry.name;
  }
  return "unknown";
}

std::optional<Coll> coll_from_name(std::string_view name) noexcept {
  for (const CollName& entry : kCollNames) {
    if (entry.name == name) return entry.coll;
  }
  return std::nullopt;
}

Options parse_options(int argc, const char* const* argv) {
  Options opt;
  std::optional<Coll> coll;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.size() < 2 || arg[0] != '-') {
      if (coll) throw UsageError(fmt::format("unexpected argument '{}'", arg));
      coll = coll_from_name(arg);
      if (!coll) throw UsageError(fmt::format("unknown collective '{}'", arg));
      continue;
    }
    std::optional<std::string_view> value;
    const FlagSpec& spec = split_flag(arg, value);
    if (!spec.takes_value && value) {
      throw UsageError(fmt::format("option '{}' takes no value", arg));
    }
    if (spec.takes_value && !value) {
      if (i + 1 >= argc) throw UsageError(fmt::format("option '{}' needs a value", arg));
      value = argv[++i];
    }
    apply_flag(opt, spec, value.value_or(""));
  }
  if (opt.help) return opt;
  if (!coll && opt.calibrate) coll = Coll::AllReduce;
  if (!coll) throw UsageError("missing the collective to run");
  opt.coll = *coll;
  if (opt.coll == Coll::SendRecv && opt.run_out_of_place) opt.run_in_place = false;  // none
  validate(opt);
  return opt;
}

std::string usage_text(std::string_view program) {
  return fmt::format(
      "Usage: {} COLLECTIVE [options]\n"
      "  COLLECTIVE: allreduce, allgather, broadcast, reduce, reducescatter (reduce_scatter),\n"
      "              alltoall, alltoallv, gather, scatter, sendrecv (each rank sends to the\n"
      "              next and receives from the previous at once; out of place; busbw = algbw)\n"
      "  SIZE is the bytes of one rank's buffer, as in nccl-tests: allreduce, broadcast and\n"
      "  reduce count one rank's data; allgather, reducescatter, alltoall, gather and scatter\n"
      "  count the blocks of all ranks (allgather's receive buffer, alltoall's send buffer,\n"
      "  the root's buffer of gather and scatter); alltoallv counts the mean bytes a rank sends\n"
      "  (here every rank's total): rank r sends 1 + ((r + p) mod n) units of COUNT elements\n"
      "  to rank p, n(n+1)/2 units in all, so blocks are uneven. busbw = algbw x factor:\n"
      "  allreduce 2(n-1)/n; allgather, reducescatter, alltoall(v), gather, scatter (n-1)/n;\n"
      "  broadcast, reduce 1. In place: alltoall(v) send == recv; gather send == recv + rank x\n"
      "  count; scatter recv == send + rank x count (on every rank, as nccl-tests)\n"
      "{}"
      "  -c, --check 0/1           verify results (default 1)\n"
      "  -d, --datatype TYPE       int8 uint8 int32 uint32 int64 uint64 half bfloat16 float\n"
      "                            double f8e4m3 f8e5m2, a comma list, or all (default float)\n"
      "  -o, --op OP               sum prod min max avg, mulsum (PreMulSum, scalar 1), band bor\n"
      "                            bxor (integer types only), a comma list, or all (default sum)\n"
      "  -r, --root N              root of broadcast, reduce, gather, scatter (default 0)\n"
      "  -a, --average 0/1/2/3     time reported: 0 rank 0, 1 average (default), 2 min, 3 max\n"
      "  -z, --blocking 0/1        1: wait for each call before issuing the next (default 0:\n"
      "                            issue all timed calls, then wait for them)\n"
      "      --inplace-only        run only the in-place variant\n"
      "      --outofplace-only     run only the out-of-place variant\n"
      "      --algo NAME           LOOM_ALGO for this run: auto, ring, tree, rd, hier, bruck, or "
      "per "
      "collective\n"
      "                            (allreduce:tree,broadcast:ring)\n"
      "      --deterministic       LOOM_DETERMINISTIC=1 for this run\n"
      "      --calibrate           measure the cost model's constants on this machine and\n"
      "                            print them as LOOM_TUNING=... (no COLLECTIVE needed)\n"
      "      --device DEV          buffers on: host (default), host-shared (loom::host_alloc:\n"
      "                            ranks on the host read them directly, one copy), cuda\n"
      "                            (device memory, one\n"
      "                            stream per rank, stream-ordered calls), host-sim (the\n"
      "                            host simulation of the device path; logic, not speed)\n"
      "      --stream own|default  with --device cuda or host-sim: call on a stream of each\n"
      "                            rank's own (default), or on the device's default (legacy)\n"
      "                            stream, as torch's default stream does\n"
      "      --transport NAME      run over one transport: tcp, shm or ofi (LOOM_TRANSPORTS)\n"
      "      --compare-transports A,B[,C]\n"
      "                            run the same verified sweep over each transport and print\n"
      "                            one table: busbw per transport and the ratio A/B\n"
      "      --compare-algos A,B[,C...]\n"
      "                            time the algorithms (ring, tree, rd, hier, bruck, auto) at\n"
      "                            each size, --rounds times, on one communicator; print the\n"
      "                            median time of each, the fastest, and auto against it\n"
      "                            (verified)\n"
      "      --rounds N            rounds of --compare-algos (default 5)\n"
      "      --json FILE           also write every row (per transport) as JSON to FILE;\n"
      "                            benchmarks/plot_busbw.py FILE OUT.svg draws busbw vs size\n"
      "      --plant-error         testing: flip one received element on the last rank before\n"
      "                            each check, so the rows must report #wrong 1 (exit 1)\n"
      "  -g, --group N             issue N calls per timed iteration inside one group\n"
      "                            (group_start/group_end: allreduces fused, sends side by side);\n"
      "                            times are per call, to compare with -g 1\n"
      "  -h, --help                print this help\n"
      "Run under `loomrun -n N {} ...`; without a launcher environment it runs as one rank.\n",
      program, bench::kSweepUsage, program);
}

}  // namespace loom::perf
