#include "optimizer.hpp"

#include <cmath>

namespace train {

Optimizer::Optimizer(std::string kind, double lr, double momentum, std::size_t n)
    : kind_(std::move(kind)), lr_(lr), momentum_(momentum) {
  state_.m.assign(n, 0.0f);
  if (kind_ == "adam") state_.v.assign(n, 0.0f);
}

void Optimizer::step(std::vector<float>& params, const std::vector<float>& grads) {
  ++state_.t;
  const auto lr = static_cast<float>(lr_);
  if (kind_ == "sgd") {
    const auto mu = static_cast<float>(momentum_);
    for (std::size_t i = 0; i < params.size(); ++i) {
      state_.m[i] = mu * state_.m[i] + grads[i];
      params[i] -= lr * state_.m[i];
    }
    return;
  }
  constexpr float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
  const auto t = static_cast<double>(state_.t);
  const auto c1 = static_cast<float>(1.0 - std::pow(0.9, t));
  const auto c2 = static_cast<float>(1.0 - std::pow(0.999, t));
  for (std::size_t i = 0; i < params.size(); ++i) {
    const float g = grads[i];
    state_.m[i] = b1 * state_.m[i] + (1.0f - b1) * g;
    state_.v[i] = b2 * state_.v[i] + (1.0f - b2) * g * g;
    params[i] -= lr * (state_.m[i] / c1) / (std::sqrt(state_.v[i] / c2) + eps);
  }
}

}  // namespace train
