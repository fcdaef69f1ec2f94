// Helpers of the arena tests (test_arena.cpp, test_arena_pieces.cpp): float inputs whose sums
// round differently in every order, their rank-order sum, and the algorithm a call took.
#pragma once

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "loom/loom.hpp"

namespace loom::test {

/// Rank `rank`'s input: values over many binades, so the order of a sum changes its rounding.
inline std::vector<float> random_floats(int rank, std::size_t count, unsigned salt = 0) {
  std::mt19937 gen(99u + static_cast<unsigned>(rank) * 7919u + salt);
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-12, 12);
  std::vector<float> v(count);
  for (auto& x : v) x = std::ldexp(mant(gen), expo(gen));
  return v;
}

/// ((x0 + x1) + x2) + ... of random_floats over ranks 0..n-1.
inline std::vector<float> rank_order_sum(int n, std::size_t count, unsigned salt = 0) {
  std::vector<float> acc = random_floats(0, count, salt);
  for (int r = 1; r < n; ++r) {
    auto x = random_floats(r, count, salt);
    for (std::size_t i = 0; i < count; ++i) acc[i] += x[i];
  }
  return acc;
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// The algorithm of the communicator's last call, as its flight record gives it.
inline std::string last_algorithm(const Communicator& comm) {
  const auto doc = nlohmann::json::parse(comm.flight_record());
  const auto& calls = doc.at("calls");
  return calls.empty() ? "" : calls.back().at("algorithm").get<std::string>();
}

}  // namespace loom::test
