#include "mlp.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "data.hpp"

namespace train {

Mlp::Mlp(const std::vector<int>& layers, std::uint64_t seed) {
  std::size_t offset = 0;
  for (std::size_t l = 0; l + 1 < layers.size(); ++l) {
    LayerSlice s;
    s.in = layers[l];
    s.out = layers[l + 1];
    s.offset = offset;
    s.size = static_cast<std::size_t>(s.in) * static_cast<std::size_t>(s.out) +
             static_cast<std::size_t>(s.out);
    offset += s.size;
    layers_.push_back(s);
  }
  params_.assign(offset, 0.0f);
  grads_.assign(offset, 0.0f);
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    const LayerSlice& s = layers_[l];
    const float scale = std::sqrt(6.0f / static_cast<float>(s.in));  // He uniform; biases 0
    const std::size_t nw = static_cast<std::size_t>(s.in) * static_cast<std::size_t>(s.out);
    for (std::size_t i = 0; i < nw; ++i)
      params_[s.offset + i] = scale * unit_float(mix64(mix64(seed + 0x5eedull * (l + 1)) + i));
  }
}

void Mlp::forward(const float* x, int n) {
  acts_.resize(layers_.size() + 1);
  acts_[0].assign(x, x + static_cast<std::size_t>(n) * static_cast<std::size_t>(layers_[0].in));
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    const LayerSlice& s = layers_[l];
    const float* w = params_.data() + s.offset;
    const float* b = w + static_cast<std::size_t>(s.in) * static_cast<std::size_t>(s.out);
    const bool last = l + 1 == layers_.size();
    auto& out = acts_[l + 1];
    out.resize(static_cast<std::size_t>(n) * static_cast<std::size_t>(s.out));
    for (int i = 0; i < n; ++i) {
      const float* a =
          acts_[l].data() + static_cast<std::size_t>(i) * static_cast<std::size_t>(s.in);
      float* z = out.data() + static_cast<std::size_t>(i) * static_cast<std::size_t>(s.out);
      for (int o = 0; o < s.out; ++o) {
        const float* wr = w + static_cast<std::size_t>(o) * static_cast<std::size_t>(s.in);
        float acc = 0.0f;
        for (int k = 0; k < s.in; ++k) acc += wr[k] * a[k];
        acc += b[o];
        z[o] = last ? acc : std::max(acc, 0.0f);
      }
    }
  }
}

void Mlp::layer_grads(int l, const float* a_in, int n, int grains) {
  const LayerSlice& s = layers_[static_cast<std::size_t>(l)];
  const auto in = static_cast<std::size_t>(s.in);
  const auto out = static_cast<std::size_t>(s.out);
  const std::size_t nw = in * out;
  grain_tmp_.resize(s.size);
  float* g = grads_.data() + s.offset;
  const int per_grain = n / grains;
  for (int gr = 0; gr < grains; ++gr) {
    std::fill(grain_tmp_.begin(), grain_tmp_.end(), 0.0f);
    for (int i = gr * per_grain; i < (gr + 1) * per_grain; ++i) {
      const float* a = a_in + static_cast<std::size_t>(i) * in;
      const float* d = delta_.data() + static_cast<std::size_t>(i) * out;
      for (std::size_t o = 0; o < out; ++o) {
        float* tw = grain_tmp_.data() + o * in;
        for (std::size_t k = 0; k < in; ++k) tw[k] += d[o] * a[k];
        grain_tmp_[nw + o] += d[o];
      }
    }
    for (std::size_t j = 0; j < s.size; ++j) g[j] += grain_tmp_[j];
  }
}

void Mlp::backprop_delta(int l, int n) {
  const LayerSlice& s = layers_[static_cast<std::size_t>(l)];
  const auto in = static_cast<std::size_t>(s.in);
  const auto out = static_cast<std::size_t>(s.out);
  const float* w = params_.data() + s.offset;
  const auto& a_in = acts_[static_cast<std::size_t>(l)];  // post-ReLU output of layer l-1
  delta_prev_.assign(static_cast<std::size_t>(n) * in, 0.0f);
  for (int i = 0; i < n; ++i) {
    float* dp = delta_prev_.data() + static_cast<std::size_t>(i) * in;
    const float* d = delta_.data() + static_cast<std::size_t>(i) * out;
    for (std::size_t o = 0; o < out; ++o)
      for (std::size_t k = 0; k < in; ++k) dp[k] += w[o * in + k] * d[o];
    const float* a = a_in.data() + static_cast<std::size_t>(i) * in;
    for (std::size_t k = 0; k < in; ++k)
      if (a[k] <= 0.0f) dp[k] = 0.0f;
  }
  delta_.swap(delta_prev_);
}

double Mlp::forward_backward(const float* x, const int* y, int n, int grains,
                             const std::function<void(int)>& layer_done) {
  if (grains < 1 || n % grains != 0)
    throw std::invalid_argument("micro-batch does not split into equal grains");
  forward(x, n);
  const auto classes = static_cast<std::size_t>(layers_.back().out);
  const auto& logits = acts_.back();
  delta_.resize(static_cast<std::size_t>(n) * classes);
  double loss = 0, grain_loss = 0;
  const int per_grain = n / grains;
  for (int i = 0; i < n; ++i) {
    const float* z = logits.data() + static_cast<std::size_t>(i) * classes;
    float* d = delta_.data() + static_cast<std::size_t>(i) * classes;
    const float zmax = *std::max_element(z, z + classes);
    double sum = 0;
    for (std::size_t c = 0; c < classes; ++c) sum += std::exp(static_cast<double>(z[c] - zmax));
    for (std::size_t c = 0; c < classes; ++c)
      d[c] = static_cast<float>(std::exp(static_cast<double>(z[c] - zmax)) / sum);
    d[y[i]] -= 1.0f;
    grain_loss += std::log(sum) - static_cast<double>(z[y[i]] - zmax);
    if ((i + 1) % per_grain == 0) loss += grain_loss, grain_loss = 0;
  }
  for (int l = static_cast<int>(layers_.size()) - 1; l >= 0; --l) {
    layer_grads(l, acts_[static_cast<std::size_t>(l)].data(), n, grains);
    layer_done(l);
    if (l > 0) backprop_delta(l, n);
  }
  return loss;
}

std::uint64_t Mlp::hash() const {
  std::uint64_t h = 1469598103934665603ull;
  const auto* p = reinterpret_cast<const unsigned char*>(params_.data());
  for (std::size_t i = 0; i < params_.size() * sizeof(float); ++i)
    h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

}  // namespace train
