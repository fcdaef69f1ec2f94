// loom-info: prints loom's version and every setting of its configuration registry (type,
// default, current value and where it comes from), and warns about LOOM_* variables that no
// setting declares. With --topology it prints what loom discovers about this host and process.
#include <cstdio>
#include <string>
#include <string_view>

#include "config/config.hpp"
#include "loom/version.hpp"
#include "report.hpp"
#include "text.hpp"
#include "topology/topology.hpp"
#include "transports.hpp"

namespace {

constexpr int kExitOk = 0;
constexpr int kExitBadConfig = 1;
constexpr int kExitUsage = 2;

constexpr std::string_view kUsageLine =
    "Usage: loom-info [--settings | --topology [--json] | --transports | --version | --help]\n";
constexpr std::string_view kUsage =
    R"(Usage: loom-info [--settings | --topology [--json] | --transports | --version | --help]

Prints loom's version and its settings: every environment variable loom reads, with its type,
default, current value and where that value comes from (default, environment or unset), grouped
by subsystem, and the values it allows (a range of numbers, or a list of names); a value outside
them is refused. LOOM_* variables that are set but that no setting declares (typos, usually) are
reported as warnings on stderr. Secret values (LOOM_SECRET, LOOM_ID) are not shown.

With --topology, prints what loom discovers about this host and this process (as one rank of a
job would): the host id (LOOM_HOST_ID, else hostname and boot id), NUMA nodes, cores and
hardware threads, the CPUs the process is bound to, and the PCI devices (GPUs, NICs, others)
with their NUMA node and link speed. With --json, prints the same as a one-rank topology file
of the format LOOM_TOPO_FILE reads.

With --transports, lists the transports this host offers (shm, tcp, ofi) and what each can
do, the libfabric providers that offer tagged reliable-datagram endpoints, and the allow list
that LOOM_TRANSPORTS and LOOM_OFI_PROVIDER resolve to here.

Options:
  --settings         print the version and the settings (the default)
  --topology         print the local topology
  --topology --json  print the local topology as JSON
  --transports       print the available transports and their capabilities
  --version          print the version only
  -h, --help         print this help

Exit status: 0, or 1 when a setting in the environment has an invalid value, 2 for bad usage.
)";

void print(std::FILE* out, std::string_view text) {
  std::fwrite(text.data(), 1, text.size(), out);
}

int print_settings() {
  auto config = loom::config::Config::load();
  if (!config) {
    print(stderr, "loom-info: error: " + config.status().message() + "\n");
    return kExitBadConfig;
  }
  print(stdout, std::string("loom ") + loom::kVersionString + "\n\n");
  print(stdout, loom::info::settings_report(*config, loom::info::output_width()));
  std::fflush(stdout);
  for (const std::string& warning : loom::info::unknown_variable_warnings(*config))
    print(stderr, "loom-info: " + warning + "\n");
  return kExitOk;
}

int print_topology(bool json) {
  auto config = loom::config::Config::load();
  if (!config) {
    print(stderr, "loom-info: error: " + config.status().message() + "\n");
    return kExitBadConfig;
  }
  auto local = loom::topo::discover_local(0, *config);
  if (!local) {
    print(stderr, "loom-info: error: " + local.status().message() + "\n");
    return kExitBadConfig;
  }
  if (json) {
    print(stdout, loom::topo::to_json(loom::topo::assemble({*local})));
  } else {
    print(stdout, loom::topo::describe_local(local->first, local->second));
  }
  return kExitOk;
}

int print_transports() {
  auto config = loom::config::Config::load();
  if (!config) {
    print(stderr, "loom-info: error: " + config.status().message() + "\n");
    return kExitBadConfig;
  }
  print(stdout, loom::info::transports_report(*config));
  return kExitOk;
}

struct Options {
  std::string_view mode = "--settings";
  bool json = false;
  std::string error;  // non-empty: bad usage
};

Options parse_options(int argc, char** argv) {
  Options opts;
  bool have_mode = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--json") {
      opts.json = true;
    } else if (arg != "-h" && arg != "--help" && arg != "--version" && arg != "--settings" &&
               arg != "--topology" && arg != "--transports") {
      opts.error = "unknown option '" + std::string(arg) + "'";
      return opts;
    } else if (have_mode) {
      opts.error = "too many arguments";
      return opts;
    } else {
      opts.mode = arg;
      have_mode = true;
    }
  }
  if (opts.json && opts.mode != "--topology") opts.error = "--json goes with --topology";
  return opts;
}

}  // namespace

int main(int argc, char** argv) {
  const Options opts = parse_options(argc, argv);
  if (!opts.error.empty()) {
    print(stderr, "loom-info: error: " + opts.error + "\n");
    print(stderr, kUsageLine);
    return kExitUsage;
  }
  const std::string_view mode = opts.mode;
  if (mode == "-h" || mode == "--help") {
    print(stdout, kUsage);
    return kExitOk;
  }
  if (mode == "--version") {
    print(stdout, std::string("loom ") + loom::kVersionString + "\n");
    return kExitOk;
  }
  if (mode == "--topology") return print_topology(opts.json);
  if (mode == "--transports") return print_transports();
  return print_settings();
}
