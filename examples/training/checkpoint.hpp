// Checkpoints: the step reached, the parameters and the optimizer state, in one file written
// atomically (temp file, fsync, rename) so that a job killed at any moment leaves either the
// previous checkpoint or the new one, never a torn file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "optimizer.hpp"

namespace train {

struct Checkpoint {
  std::uint64_t step = 0;         // optimizer steps completed
  std::uint64_t config_hash = 0;  // of the options that must match on resume
  std::vector<float> params;
  OptimizerState opt;
};

/// Throws std::runtime_error naming the path on failure.
void save_checkpoint(const std::string& path, const Checkpoint& c);
/// Empty when the file does not exist; throws on a corrupt or truncated file.
std::optional<Checkpoint> load_checkpoint(const std::string& path);

}  // namespace train
