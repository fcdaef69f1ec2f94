// A deterministic synthetic classification dataset: sample i's features and label are a pure
// function of (seed, i), so every rank can materialise exactly its own shard.
#pragma once

#include <cstdint>
#include <vector>

namespace train {

class Dataset {
 public:
  Dataset(std::uint64_t seed, std::uint64_t size, int features, int classes);

  /// Writes samples first, first+1, ... (modulo the dataset size) into x (count x features,
  /// row-major) and y (count labels).
  void fill(std::uint64_t first, int count, float* x, int* y) const;
  [[nodiscard]] int features() const { return features_; }
  [[nodiscard]] int classes() const { return classes_; }

 private:
  std::uint64_t seed_, size_;
  int features_, classes_;
  std::vector<float> teacher_;  // classes x features: label = argmax(teacher . tanh(2x))
};

/// splitmix64: the counter-based generator behind the dataset and the initial weights.
std::uint64_t mix64(std::uint64_t x);
/// Uniform in [-1, 1) from a 64-bit hash.
float unit_float(std::uint64_t h);

}  // namespace train
