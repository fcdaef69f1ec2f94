// Command line of loom-train.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace train {

struct Options {
  std::vector<int> layers{64, 512, 512, 10};  // input features, hidden widths..., classes
  int batch_size = 256;                       // global samples per optimizer step
  int update_freq = 1;                        // micro-batches accumulated per step
  int grains = 0;                             // partial-sum groups per micro-batch; 0: auto
  int steps = 100;
  std::string optimizer = "sgd";  // sgd or adam
  double lr = -1;                 // default: 0.05 (sgd), 0.001 (adam)
  double momentum = 0.0;
  double bucket_cap_mb = 25.0;
  bool overlap = true;
  std::uint64_t seed = 1;
  std::uint64_t dataset_size = 1 << 16;
  std::string checkpoint;  // path; empty: no checkpoints
  int checkpoint_every = 0;
  bool resume = false;
  int kill_at_step = -1;  // test hook: the last rank SIGKILLs itself after this step
  int log_every = 1;
};

/// Parses argv; prints usage and exits on --help or a bad flag.
Options parse_options(int argc, char** argv);

}  // namespace train
