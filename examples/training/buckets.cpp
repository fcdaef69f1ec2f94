#include "buckets.hpp"

namespace train {

GradBuckets::GradBuckets(loom::Communicator& comm, Mlp& model, double cap_mb)
    : comm_(comm), model_(model) {
  const auto cap = static_cast<std::size_t>(cap_mb * 1024.0 * 1024.0);
  const auto& layers = model.layers();
  bucket_of_layer_.assign(layers.size(), -1);
  for (int l = static_cast<int>(layers.size()) - 1; l >= 0; --l) {
    const LayerSlice& s = layers[static_cast<std::size_t>(l)];
    const bool fits = !buckets_.empty() && (buckets_.back().count + s.size) * sizeof(float) <= cap;
    if (!fits) {
      Bucket b;
      b.last_layer = l;
      buckets_.push_back(b);
    }
    Bucket& b = buckets_.back();
    b.first_layer = l;
    b.offset = s.offset;  // layers are laid out in forward order: the bucket grows downwards
    b.count += s.size;
    bucket_of_layer_[static_cast<std::size_t>(l)] = static_cast<int>(buckets_.size()) - 1;
  }
}

void GradBuckets::arm(float scale, bool overlap) {
  scale_ = scale;
  overlap_ = overlap;
  for (auto& b : buckets_) {
    b.pending = b.last_layer - b.first_layer + 1;
    b.started = false;
    b.work = loom::Work();
  }
}

void GradBuckets::start(Bucket& b) {
  float* g = model_.grads().data() + b.offset;
  for (std::size_t i = 0; i < b.count; ++i) g[i] *= scale_;
  b.work = comm_.allreduce(std::span<float>(g, b.count), loom::RedOp::Avg);
  b.started = true;
}

void GradBuckets::layer_done(int l) {
  Bucket& b = buckets_[static_cast<std::size_t>(bucket_of_layer_[static_cast<std::size_t>(l)])];
  if (--b.pending == 0 && overlap_) start(b);
}

std::chrono::duration<double> GradBuckets::finish() {
  for (auto& b : buckets_)
    if (!b.started) start(b);
  std::chrono::duration<double> waited{0};
  for (auto& b : buckets_) {
    const auto t0 = std::chrono::steady_clock::now();
    b.work.wait();
    waited += std::chrono::steady_clock::now() - t0;
  }
  return waited;
}

}  // namespace train
