// Command line of the baseline benchmarks (loom-perf's flags). See common.hpp.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <iterator>
#include <limits>
#include <optional>

#include "benchmarks/baselines/common.hpp"

namespace loom::baselines {
namespace {

// --- Command line --------------------------------------------------------------------------------

std::size_t size_value(std::string_view flag, std::string_view text) {
  return bench::size_value<UsageError>(flag, text);
}

long long int_value(std::string_view flag, std::string_view text, long long lo, long long hi) {
  return bench::int_value<UsageError>(flag, text, lo, hi);
}

std::vector<Dtype> dtype_list(std::string_view text) {
  std::vector<Dtype> out;
  while (true) {
    const std::size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    if (item == "float" || item == "fp32" || item == "float32" || item == "f32") {
      out.push_back(Dtype::Float32);
    } else if (item == "double" || item == "fp64" || item == "float64" || item == "f64") {
      out.push_back(Dtype::Float64);
    } else {
      throw UsageError(fmt::format("unsupported datatype '{}' (float or double)", item));
    }
    if (comma == std::string_view::npos) return out;
    text.remove_prefix(comma + 1);
  }
}

// Applies one flag; `value` is empty for flags without a value.
void apply(Options& opt, std::string_view flag, std::string_view value) {
  constexpr long long kIntMax = std::numeric_limits<int>::max();
  if (flag == "-b" || flag == "--minbytes") {
    opt.min_bytes = size_value(flag, value);
  } else if (flag == "-e" || flag == "--maxbytes") {
    opt.max_bytes = size_value(flag, value);
  } else if (flag == "-f" || flag == "--stepfactor") {
    opt.step_factor = static_cast<std::size_t>(int_value(flag, value, 2, 1 << 20));
    opt.step_bytes = 0;
  } else if (flag == "-i" || flag == "--stepbytes") {
    opt.step_bytes = size_value(flag, value);
    if (opt.step_bytes == 0) throw UsageError("-i needs a step of at least 1 byte");
  } else if (flag == "-n" || flag == "--iters") {
    opt.iters = static_cast<int>(int_value(flag, value, 1, kIntMax));
  } else if (flag == "-w" || flag == "--warmup_iters") {
    opt.warmup = static_cast<int>(int_value(flag, value, 0, kIntMax));
  } else if (flag == "-c" || flag == "--check") {
    opt.check = int_value(flag, value, 0, kIntMax) != 0;
  } else if (flag == "-d" || flag == "--datatype") {
    opt.dtypes = dtype_list(value);
  } else if (flag == "-o" || flag == "--op") {
    if (value != "sum") throw UsageError(fmt::format("unsupported op '{}' (only sum)", value));
  } else if (flag == "--store-dir") {
    opt.store_dir = std::string(value);
  }
}

bool takes_value(std::string_view flag) {
  return flag != "-h" && flag != "--help" && flag != "--inplace-only" &&
         flag != "--outofplace-only";
}

bool known_flag(std::string_view flag, bool with_store_dir) {
  static constexpr std::string_view kFlags[] = {"-b",
                                                "--minbytes",
                                                "-e",
                                                "--maxbytes",
                                                "-f",
                                                "--stepfactor",
                                                "-i",
                                                "--stepbytes",
                                                "-n",
                                                "--iters",
                                                "-w",
                                                "--warmup_iters",
                                                "-c",
                                                "--check",
                                                "-d",
                                                "--datatype",
                                                "-o",
                                                "--op",
                                                "-h",
                                                "--help",
                                                "--inplace-only",
                                                "--outofplace-only"};
  if (flag == "--store-dir") return with_store_dir;
  return std::find(std::begin(kFlags), std::end(kFlags), flag) != std::end(kFlags);
}

}  // namespace

std::string_view dtype_name(Dtype dtype) noexcept {
  return dtype == Dtype::Float32 ? "float" : "double";
}

std::size_t dtype_size(Dtype dtype) noexcept {
  return dtype == Dtype::Float32 ? sizeof(float) : sizeof(double);
}

Options parse_options(int argc, const char* const* argv, bool with_store_dir) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    std::string_view flag = argv[i];
    std::string_view value;
    bool has_value = false;
    if (flag.starts_with("--") && flag.find('=') != std::string_view::npos) {
      value = flag.substr(flag.find('=') + 1);
      flag = flag.substr(0, flag.find('='));
      has_value = true;
    } else if (!flag.starts_with("--") && flag.size() > 2 && flag[0] == '-') {
      value = flag.substr(2);  // "-b8"
      flag = flag.substr(0, 2);
      has_value = true;
    }
    if (!known_flag(flag, with_store_dir)) {
      throw UsageError(fmt::format("unknown argument '{}'", argv[i]));
    }
    if (takes_value(flag) && !has_value) {
      if (i + 1 >= argc) throw UsageError(fmt::format("option '{}' needs a value", flag));
      value = argv[++i];
    } else if (!takes_value(flag) && has_value) {
      throw UsageError(fmt::format("option '{}' takes no value", flag));
    }
    if (flag == "-h" || flag == "--help") opt.help = true;
    if (flag == "--inplace-only") opt.run_out_of_place = false;
    if (flag == "--outofplace-only") opt.run_in_place = false;
    apply(opt, flag, value);
  }
  if (opt.min_bytes > opt.max_bytes) {
    throw UsageError(
        fmt::format("minbytes ({}) is larger than maxbytes ({})", opt.min_bytes, opt.max_bytes));
  }
  if (!opt.run_in_place && !opt.run_out_of_place) {
    throw UsageError("--inplace-only and --outofplace-only exclude each other");
  }
  return opt;
}

std::string usage_text(std::string_view program, bool with_store_dir) {
  return fmt::format(
      "Usage: {} [options]   (fp32/fp64 sum-allreduce, loom-perf's table)\n"
      "{}"
      "  -c, --check 0/1           verify every element (default 1)\n"
      "  -d, --datatype TYPE       float, double or a comma list (default float)\n"
      "  -o, --op sum              the only operator\n"
      "      --inplace-only        run only the in-place variant\n"
      "      --outofplace-only     run only the out-of-place variant\n"
      "{}"
      "  -h, --help                print this help\n"
      "Time is the per-iteration time averaged over ranks (loom-perf -a 1).\n",
      program, bench::kSweepUsage,
      with_store_dir ? "      --store-dir DIR       FileStore rendezvous directory (default "
                       "$TMPDIR or /tmp)\n"
                     : "");
}

}  // namespace loom::baselines
