// SGD (with optional momentum) and Adam over a flat parameter vector.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace train {

struct OptimizerState {
  std::vector<float> m, v;  // momentum / Adam first moment; Adam second moment
  std::uint64_t t = 0;      // updates applied
};

class Optimizer {
 public:
  Optimizer(std::string kind, double lr, double momentum, std::size_t n);
  void step(std::vector<float>& params, const std::vector<float>& grads);
  OptimizerState& state() { return state_; }
  [[nodiscard]] const std::string& kind() const { return kind_; }

 private:
  std::string kind_;
  double lr_, momentum_;
  OptimizerState state_;
};

}  // namespace train
