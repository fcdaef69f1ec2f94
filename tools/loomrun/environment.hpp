// The environment each rank starts with.
#pragma once

#include <string>
#include <vector>

#include "options.hpp"

namespace loom::run {

/// What every rank of one job shares.
struct JobIdentity {
  std::string root;                   // LOOM_ROOT, host:port
  std::string secret;                 // LOOM_SECRET, 32 hex characters
  std::vector<std::string> host_ids;  // --hosts: each host's network namespace (LOOM_HOST_ID)
};

/// Uses --root when given, else a port that was free on 127.0.0.1 a moment ago; draws a fresh
/// secret from /dev/urandom. Throws RunError.
JobIdentity make_job_identity(const Options& options);

/// A port on 127.0.0.1 that was free when this returned (found by binding port 0). Throws.
int find_free_port();

/// 16 random bytes from /dev/urandom as 32 lower-case hex characters. Throws.
std::string random_secret_hex();

/// loomrun's environment, less the variables it sets, plus LOOM_* for `rank` and the -x
/// variables, as "NAME=VALUE" strings.
std::vector<std::string> rank_environment(const Options& options, const JobIdentity& job, int rank);

}  // namespace loom::run
