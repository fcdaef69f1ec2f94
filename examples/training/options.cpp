#include "options.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string_view>

namespace train {
namespace {

const char* kUsage =
    "Usage: loom-train [options]   (launch with loomrun, srun, mpirun or torchrun)\n"
    "Data-parallel MLP classifier on a deterministic synthetic dataset, one shard per rank.\n"
    "  --layers A,B,..,C      input features, hidden widths, classes (default 64,512,512,10)\n"
    "  --batch-size N         global samples per optimizer step (default 256)\n"
    "  --update-freq N        micro-batches accumulated per step (default 1)\n"
    "  --grains N             partial-sum groups per micro-batch, a multiple of the rank count\n"
    "                         (default: 4 when the rank count divides 4, else the rank count)\n"
    "  --steps N              optimizer steps (default 100)\n"
    "  --optimizer sgd|adam   (default sgd)\n"
    "  --lr X                 learning rate (default 0.05 for sgd, 0.001 for adam)\n"
    "  --momentum X           SGD momentum (default 0)\n"
    "  --bucket-cap-mb X      gradient bucket size in MiB (default 25)\n"
    "  --no-overlap           allreduce buckets only after the whole backward pass\n"
    "  --seed N               dataset and initial weights (default 1)\n"
    "  --dataset-size N       samples in the synthetic dataset (default 65536)\n"
    "  --checkpoint PATH      checkpoint file (rank 0 writes it atomically)\n"
    "  --checkpoint-every K   write a checkpoint every K steps (default 0: never)\n"
    "  --resume               continue from --checkpoint when it exists\n"
    "  --log-every N          log every N steps on rank 0 (default 1)\n"
    "  --kill-at-step S       test hook: the last rank kills itself (SIGKILL) after step S\n";

[[noreturn]] void usage_error(const std::string& msg) {
  std::fprintf(stderr, "loom-train: %s\n%s", msg.c_str(), kUsage);
  std::exit(2);
}

long long to_int(std::string_view flag, const char* v, long long lo) {
  char* end = nullptr;
  long long x = std::strtoll(v, &end, 10);
  if (*v == '\0' || *end != '\0' || x < lo)
    usage_error(std::string(flag) + " needs an integer >= " + std::to_string(lo));
  return x;
}

double to_double(std::string_view flag, const char* v) {
  char* end = nullptr;
  double x = std::strtod(v, &end);
  if (*v == '\0' || *end != '\0' || !(x >= 0))
    usage_error(std::string(flag) + " needs a number >= 0");
  return x;
}

std::vector<int> to_layers(const char* v) {
  std::vector<int> out;
  std::stringstream ss(v);
  std::string item;
  while (std::getline(ss, item, ','))
    out.push_back(static_cast<int>(to_int("--layers", item.c_str(), 1)));
  if (out.size() < 2) usage_error("--layers needs at least input,classes");
  return out;
}

}  // namespace

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) usage_error(std::string(a) + " needs a value");
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (a == "--layers") {
      o.layers = to_layers(next());
    } else if (a == "--batch-size") {
      o.batch_size = static_cast<int>(to_int(a, next(), 1));
    } else if (a == "--update-freq") {
      o.update_freq = static_cast<int>(to_int(a, next(), 1));
    } else if (a == "--grains") {
      o.grains = static_cast<int>(to_int(a, next(), 1));
    } else if (a == "--steps") {
      o.steps = static_cast<int>(to_int(a, next(), 0));
    } else if (a == "--optimizer") {
      o.optimizer = next();
      if (o.optimizer != "sgd" && o.optimizer != "adam") usage_error("--optimizer: sgd or adam");
    } else if (a == "--lr") {
      o.lr = to_double(a, next());
    } else if (a == "--momentum") {
      o.momentum = to_double(a, next());
    } else if (a == "--bucket-cap-mb") {
      o.bucket_cap_mb = to_double(a, next());
    } else if (a == "--no-overlap") {
      o.overlap = false;
    } else if (a == "--seed") {
      o.seed = static_cast<std::uint64_t>(to_int(a, next(), 0));
    } else if (a == "--dataset-size") {
      o.dataset_size = static_cast<std::uint64_t>(to_int(a, next(), 1));
    } else if (a == "--checkpoint") {
      o.checkpoint = next();
    } else if (a == "--checkpoint-every") {
      o.checkpoint_every = static_cast<int>(to_int(a, next(), 0));
    } else if (a == "--resume") {
      o.resume = true;
    } else if (a == "--log-every") {
      o.log_every = static_cast<int>(to_int(a, next(), 1));
    } else if (a == "--kill-at-step") {
      o.kill_at_step = static_cast<int>(to_int(a, next(), 0));
    } else {
      usage_error("unknown option " + std::string(a));
    }
  }
  if (o.lr < 0) o.lr = o.optimizer == "adam" ? 0.001 : 0.05;
  if ((o.checkpoint_every > 0 || o.resume) && o.checkpoint.empty())
    usage_error("--checkpoint-every and --resume need --checkpoint PATH");
  return o;
}

}  // namespace train
