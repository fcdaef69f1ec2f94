#include "data.hpp"

#include <cmath>

namespace train {

std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

float unit_float(std::uint64_t h) {
  return static_cast<float>(static_cast<double>(h >> 40) / static_cast<double>(1ull << 23) - 1.0);
}

Dataset::Dataset(std::uint64_t seed, std::uint64_t size, int features, int classes)
    : seed_(seed), size_(size), features_(features), classes_(classes) {
  teacher_.resize(static_cast<std::size_t>(classes) * static_cast<std::size_t>(features));
  for (std::size_t i = 0; i < teacher_.size(); ++i)
    teacher_[i] = unit_float(mix64(mix64(seed ^ 0x7eac4e5ull) + i));
}

void Dataset::fill(std::uint64_t first, int count, float* x, int* y) const {
  const auto f = static_cast<std::size_t>(features_);
  for (int s = 0; s < count; ++s) {
    const std::uint64_t idx = (first + static_cast<std::uint64_t>(s)) % size_;
    float* row = x + static_cast<std::size_t>(s) * f;
    const std::uint64_t base = mix64(seed_ * 0x100000001b3ull + idx);
    for (std::size_t j = 0; j < f; ++j) row[j] = unit_float(mix64(base + j));
    int best = 0;
    double best_score = -1e300;
    for (int c = 0; c < classes_; ++c) {
      double score = 0;
      for (std::size_t j = 0; j < f; ++j)
        score += teacher_[static_cast<std::size_t>(c) * f + j] * std::tanh(2.0 * row[j]);
      if (score > best_score) best_score = score, best = c;
    }
    y[s] = best;
  }
}

}  // namespace train
