// Reads the environment a launcher set (through the config registry) into who-am-I facts.
#pragma once

#include <string>

#include "config/config.hpp"

namespace loom::core {

struct LaunchInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = -1;
  std::string root;        // host:port of the rendezvous, or "" when `id_hex` is set
  std::string id_hex;      // LOOM_ID
  std::string secret_hex;  // LOOM_SECRET
  std::string source;      // "loom", "torchrun"
};

/// Precedence: loom's own LOOM_* variables, then torchrun's. Missing or contradictory variables
/// are an InvalidUsage error that names them.
Result<LaunchInfo> detect_launch(const config::Config& cfg);

}  // namespace loom::core
