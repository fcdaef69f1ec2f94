// A multi-layer perceptron (ReLU hidden layers, softmax cross-entropy) with all parameters and
// gradients in one flat float vector each, laid out layer by layer (W then b).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace train {

struct LayerSlice {
  std::size_t offset = 0;  // of W in the flat vector; b follows W
  std::size_t size = 0;    // W and b together
  int in = 0, out = 0;
};

class Mlp {
 public:
  Mlp(const std::vector<int>& layers, std::uint64_t seed);

  [[nodiscard]] std::size_t num_params() const { return params_.size(); }
  [[nodiscard]] const std::vector<LayerSlice>& layers() const { return layers_; }
  std::vector<float>& params() { return params_; }
  std::vector<float>& grads() { return grads_; }

  /// Forward and backward on `n` samples split into `grains` equal groups. Adds to grads():
  /// for every parameter, the sum over grains (in order) of the grain's summed per-sample
  /// gradient of the cross-entropy; this summation order depends only on the grains, never on
  /// how many ranks share them. `layer_done(l)` is called as soon as layer l's gradients are
  /// final for this call, from the last layer to the first. Returns the summed loss.
  double forward_backward(const float* x, const int* y, int n, int grains,
                          const std::function<void(int)>& layer_done);

  /// FNV-1a of the parameters' bytes, to compare runs bit for bit.
  [[nodiscard]] std::uint64_t hash() const;

 private:
  void forward(const float* x, int n);
  void layer_grads(int l, const float* a_in, int n, int grains);
  void backprop_delta(int l, int n);

  std::vector<LayerSlice> layers_;
  std::vector<float> params_, grads_;
  // Per micro-batch work space: activations a[l] (n x width) and deltas.
  std::vector<std::vector<float>> acts_;
  std::vector<float> delta_, delta_prev_, grain_tmp_;
};

}  // namespace train
