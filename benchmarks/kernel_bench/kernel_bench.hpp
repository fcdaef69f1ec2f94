// loom-kernel-bench's command line and its device sweep (device_bench.cpp).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "loom/types.hpp"

namespace loom::kbench {

struct Args {
  std::string device = "cuda";
  std::size_t min_bytes = 0;  // 0: only max_bytes (one size)
  std::size_t max_bytes = std::size_t{64} << 20;
  std::size_t factor = 2;
  int iters = 20;     // kernel launches per timed batch
  bool copy = true;   // device: a device-to-device copy row at each size (the HBM limit)
  bool check = true;  // device: each kernel's output against the host kernels, bit for bit
  std::vector<DataType> dtypes{DataType::Float32, DataType::BFloat16, DataType::Float16,
                               DataType::Float8E4M3, DataType::Float8E5M2};
  std::vector<RedOp> ops{RedOp::Sum};
};

/// min_bytes (or max_bytes alone), growing by `factor` while <= max_bytes.
std::vector<std::size_t> size_list(const Args& a);

/// The device kernels (kernels/cuda) through the device seam on runtime `a.device` ("cuda" or
/// "host-sim"), at every size: a copy row, then one row per (dtype, op), each verified. Returns
/// the exit status (0 all verified, 1 a kernel wrote a wrong value).
int run_device(const Args& a);

}  // namespace loom::kbench
