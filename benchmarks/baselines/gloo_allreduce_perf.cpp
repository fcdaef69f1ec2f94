// gloo-allreduce-perf: Gloo's ring allreduce (gloo::allreduce with Algorithm::RING, fp32/fp64 sum)
// over its TCP transport on loopback, timed and checked like loom-perf, printing loom-perf's
// table, as a baseline for benchmarks/compare.py.
//
//   loomrun -n 4 --only-rank 0 --no-prefix gloo-allreduce-perf -b 8 -e 256M -f 4 -n 20 -w 5
//
// Ranks come from LOOM_RANK / LOOM_WORLD_SIZE (loomrun); without them it runs as one rank. They
// meet through a gloo FileStore in a per-job directory below --store-dir (default $TMPDIR or /tmp),
// named after LOOM_SECRET (or LOOM_ROOT); rank 0 removes it at the end. Exit status: 0 all checks
// passed, 1 wrong results, 2 usage error, 3 other error.
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/config.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "benchmarks/baselines/common.hpp"

namespace loom::baselines {
namespace {

constexpr std::chrono::minutes kTimeout{5};

using ReduceFn = void (*)(void*, const void*, const void*, std::size_t);

std::optional<int> env_int(const char* name) {
  const char* text = std::getenv(name);
  if (text == nullptr) return std::nullopt;
  int value = 0;
  const std::string_view view(text);
  const auto [end, ec] = std::from_chars(view.data(), view.data() + view.size(), value);
  if (ec != std::errc() || end != view.data() + view.size()) {
    throw std::runtime_error(std::string("invalid ") + name + "='" + text + "'");
  }
  return value;
}

// A name shared by the job's ranks and unique to the job.
std::string job_name() {
  std::string id;
  if (const char* secret = std::getenv("LOOM_SECRET"); secret != nullptr && *secret != '\0') {
    id = secret;
  } else if (const char* root = std::getenv("LOOM_ROOT"); root != nullptr && *root != '\0') {
    id = root;
  } else {
    id = std::to_string(::getpid());
  }
  for (char& c : id) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return "gloo-allreduce-perf." + id;
}

class GlooBackend final : public Backend {
 public:
  GlooBackend(int rank, int size, const std::filesystem::path& store_dir)
      : rank_(rank), size_(size) {
    gloo::transport::tcp::attr attr("127.0.0.1");
    attr.ai_family = AF_INET;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    std::filesystem::create_directories(store_dir);
    gloo::rendezvous::FileStore file_store(store_dir.string());
    gloo::rendezvous::PrefixStore store("allreduce", file_store);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    context->setTimeout(kTimeout);
    context->connectFullMesh(store, device);
    context_ = std::move(context);
  }

  [[nodiscard]] int rank() const override { return rank_; }
  [[nodiscard]] int size() const override { return size_; }

  [[nodiscard]] std::string description() const override {
    return "Gloo " + std::to_string(GLOO_VERSION_MAJOR) + "." + std::to_string(GLOO_VERSION_MINOR) +
           "." + std::to_string(GLOO_VERSION_PATCH) +
           ", gloo::allreduce ring, tcp transport on 127.0.0.1";
  }

  void allreduce(const void* in, void* out, std::size_t count, Dtype dtype) override {
    if (dtype == Dtype::Float32) {
      reduce_typed<float>(in, out, count);
    } else {
      reduce_typed<double>(in, out, count);
    }
  }

  void barrier() override {
    gloo::BarrierOptions opts(context_);
    opts.setTag(kBarrierTag);
    gloo::barrier(opts);
  }

  double sum(double value) override {
    double out = value;
    reduce_typed<double>(&out, &out, 1);
    return out;
  }

  std::uint64_t sum(std::uint64_t value) override {
    std::uint64_t out = value;
    reduce_typed<std::uint64_t>(&out, &out, 1);
    return out;
  }

  std::vector<RankRecord> allgather(const RankRecord& mine) override {
    std::vector<RankRecord> all(static_cast<std::size_t>(size_));
    all[static_cast<std::size_t>(rank_)] = mine;
    gloo::AllgatherOptions opts(context_);
    opts.setOutput(reinterpret_cast<char*>(all.data()), all.size() * sizeof(RankRecord));
    opts.setTag(kAllgatherTag);
    gloo::allgather(opts);
    return all;
  }

 private:
  static constexpr std::uint32_t kAllreduceTag = 1;
  static constexpr std::uint32_t kBarrierTag = 2;
  static constexpr std::uint32_t kAllgatherTag = 3;

  // `in == out` runs in place: gloo then uses the output as the input.
  template <typename T>
  void reduce_typed(const void* in, void* out, std::size_t count) {
    gloo::AllreduceOptions opts(context_);
    opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    if (in != out) opts.setInput(static_cast<T*>(const_cast<void*>(in)), count);
    opts.setOutput(static_cast<T*>(out), count);
    opts.setReduceFunction(static_cast<ReduceFn>(&gloo::sum<T>));
    opts.setTag(kAllreduceTag);
    gloo::allreduce(opts);
  }

  int rank_;
  int size_;
  std::shared_ptr<gloo::Context> context_;
};

std::string_view program_name(int argc, char** argv) {
  if (argc < 1 || argv[0] == nullptr) return "gloo-allreduce-perf";
  const std::string_view path = argv[0];
  const std::size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

std::filesystem::path store_base(const Options& options) {
  if (!options.store_dir.empty()) return options.store_dir;
  const char* tmp = std::getenv("TMPDIR");
  return (tmp != nullptr && *tmp != '\0') ? tmp : "/tmp";
}

int run(int argc, char** argv) {
  const std::string_view program = program_name(argc, argv);
  const int rank = env_int("LOOM_RANK").value_or(0);
  const int size = env_int("LOOM_WORLD_SIZE").value_or(1);
  if (size < 1 || rank < 0 || rank >= size) {
    throw std::runtime_error("LOOM_RANK must be in [0, LOOM_WORLD_SIZE)");
  }
  Options options;
  const auto parse = [&] {
    options = parse_options(argc, argv, true);
    return options.help;
  };
  if (const auto status = parse_or_exit(parse, rank == 0, program, usage_text(program, true))) {
    return *status;
  }
  const std::filesystem::path dir = store_base(options) / job_name();
  GlooBackend backend(rank, size, dir);
  const int status = run_benchmark(backend, options, program);
  backend.barrier();  // every rank is past the rendezvous before the files go
  if (rank == 0) {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
  return status;
}

}  // namespace
}  // namespace loom::baselines

int main(int argc, char** argv) {
  try {
    return loom::baselines::run(argc, argv);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "gloo-allreduce-perf: error: %s\n", e.what());
    return loom::baselines::kExitError;
  }
}
