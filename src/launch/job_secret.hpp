// The secret a job launched from its environment authenticates with (docs/reliability.md,
// "Authentication"): every rank must find the same one without a channel to share it.
#pragma once

#include <string>
#include <string_view>

#include "common/status.hpp"
#include "config/config.hpp"

namespace loom::launch {

/// 32 hex digits (128 bits), or "" for an unauthenticated job:
/// - LOOM_SECRET when set: 32 to 64 hex digits (longer ones are hashed down to 128 bits); a
///   shorter one is refused (InvalidUsage naming the setting).
/// - else the per-user secret file (LOOM_SECRET_FILE; default ~/.config/loom/secret), created
///   with mode 0600 on first use and refused when others may read it, mixed with the launcher's
///   job identity (`launcher`: "slurm", "torchrun", "mpirun"; see job_identity) so two jobs of
///   one user never share a secret;
/// - "" when LOOM_SECRET_FILE=none, with a warning (once per process).
Result<std::string> job_secret(const config::Config& cfg, std::string_view launcher);

/// What tells this job from another of the same user: "slurm 1234.0", "torchrun <run id>",
/// "mpirun <namespace>", or "" (loomrun sets LOOM_SECRET itself; other launches have none).
std::string job_identity(const config::Config& cfg, std::string_view launcher);

/// The secret file's path: LOOM_SECRET_FILE, else ~/.config/loom/secret of this user.
Result<std::string> secret_file_path(const config::Config& cfg);

/// Reads the secret file at `path` (32 hex digits), creating it first when it does not exist;
/// refuses a file that is not a regular file of this user with mode 0600 or stricter.
Result<std::string> read_or_create_secret_file(const std::string& path);

}  // namespace loom::launch
