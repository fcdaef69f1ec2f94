// Gradient buckets: consecutive layers' gradients (from the last layer backwards, like the order
// backward produces them) grouped up to a size cap. A bucket's allreduce (avg) starts the moment
// the backward pass has finished its last layer, and runs while backward continues.
#pragma once

#include <chrono>
#include <cstddef>
#include <loom/loom.hpp>
#include <vector>

#include "mlp.hpp"

namespace train {

class GradBuckets {
 public:
  GradBuckets(loom::Communicator& comm, Mlp& model, double cap_mb);

  /// Arms the buckets for the backward pass that completes this step's gradients: each bucket
  /// is multiplied by `scale` (to the local mean) and allreduced with avg once complete.
  void arm(float scale, bool overlap);
  /// Backward finished layer `l`'s gradients.
  void layer_done(int l);
  /// Starts what has not started yet and waits for every bucket; returns the time spent
  /// blocked in Work::wait.
  std::chrono::duration<double> finish();

  [[nodiscard]] std::size_t count() const { return buckets_.size(); }
  [[nodiscard]] std::size_t bytes(std::size_t i) const { return buckets_[i].count * sizeof(float); }

 private:
  struct Bucket {
    std::size_t offset = 0, count = 0;
    int first_layer = 0, last_layer = 0;
    int pending = 0;
    bool started = false;
    loom::Work work;
  };
  void start(Bucket& b);

  loom::Communicator& comm_;
  Mlp& model_;
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_layer_;
  float scale_ = 1.0f;
  bool overlap_ = true;
};

}  // namespace train
