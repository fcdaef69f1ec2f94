// loomrun's command line.
#pragma once

#include <chrono>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace loom::run {

/// Exit codes of loomrun itself (see usage_text()).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitTimeout = 124;
inline constexpr int kExitSignalBase = 128;

inline constexpr int kMaxRanks = 1024;

/// --cpu-bind: where the ranks may run.
enum class CpuBind {
  Block,  // each rank a contiguous share of loomrun's cores (topo::block_binding); the default
  None,   // wherever loomrun may run
};

struct Options {
  int nranks = 0;
  std::vector<std::string> command;                            // program and its arguments
  std::vector<std::pair<std::string, std::string>> extra_env;  // -x NAME=VALUE, in order
  std::string root;  // --root host:port; empty: a free port on 127.0.0.1
  bool prefix = true;
  std::optional<int> only_rank;  // --only-rank R: stdout of rank R only
  std::optional<std::chrono::milliseconds> timeout;
  std::chrono::milliseconds grace{2000};
  int hosts = 0;         // --hosts H: ranks spread over H network namespaces (0: none)
  int nics = 1;          // --nics K: interfaces eth0..eth(K-1) per host, each on its own network
  std::string nic_rate;  // --nic-rate R: each host interface's egress capped at R (tc tbf)
  CpuBind cpu_bind = CpuBind::Block;
};

/// The host (0..hosts-1) of `rank` under --hosts: consecutive ranks share a host, as evenly as
/// possible. 0 without --hosts.
int host_of(const Options& options, int rank);
/// The ranks on `rank`'s host: (index among them, how many).
std::pair<int, int> local_rank_of(const Options& options, int rank);

struct ParseResult {
  enum class Kind { Run, Help, Error };
  Kind kind = Kind::Error;
  Options options;
  std::string error;  // for Kind::Error
};

/// Parses argv[1..] (`args` excludes the program name).
ParseResult parse_args(std::span<const std::string> args);

/// The text printed by --help.
std::string usage_text();

/// "2", "1.5", "500ms", "30s", "5m", "1h" (a bare number is seconds); nullopt when malformed or
/// negative.
std::optional<std::chrono::milliseconds> parse_seconds(std::string_view text);

}  // namespace loom::run
