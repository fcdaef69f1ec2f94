// Reads the environment a launcher set (through the config registry) into who-am-I facts.
#pragma once

#include <string>

#include "config/config.hpp"

namespace loom::launch {

struct LaunchInfo {
  int rank = 0;
  int world_size = 1;
  int local_rank = -1;
  std::string root;        // host:port of the rendezvous, or "" when `id_hex` is set
  std::string id_hex;      // LOOM_ID
  std::string secret_hex;  // LOOM_SECRET
  std::string source;      // "loom", "torchrun", "slurm", "mpirun"
  std::string detail;      // how the root was found, what was ignored (for the log line)
};

/// Precedence: loom's own LOOM_* variables, then torchrun's, then Slurm srun's, then Open MPI
/// mpirun's. mpirun inside a Slurm allocation: the OMPI_COMM_WORLD_* variables describe this
/// process (srun never sets them), so they win over the allocation's SLURM_*; the root is
/// LOOM_ROOT, else the allocation's first node. Missing or contradictory variables are an
/// InvalidUsage error that names what was found and what is missing.
Result<LaunchInfo> detect_launch(const config::Config& cfg);

}  // namespace loom::launch
