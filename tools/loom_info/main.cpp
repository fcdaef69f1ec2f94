// loom-info: prints loom's version and every setting of its configuration registry (type,
// default, current value and where it comes from), and warns about LOOM_* variables that no
// setting declares.
#include <cstdio>
#include <string>
#include <string_view>

#include "config/config.hpp"
#include "loom/version.hpp"
#include "report.hpp"
#include "text.hpp"

namespace {

constexpr int kExitOk = 0;
constexpr int kExitBadConfig = 1;
constexpr int kExitUsage = 2;

constexpr std::string_view kUsage = R"(Usage: loom-info [--settings | --version | --help]

Prints loom's version and its settings: every environment variable loom reads, with its type,
default, current value and where that value comes from (default, environment or unset), grouped
by subsystem. LOOM_* variables that are set but that no setting declares (typos, usually) are
reported as warnings on stderr. Secret values (LOOM_SECRET, LOOM_ID) are not shown.

Options:
  --settings   print the version and the settings (the default)
  --version    print the version only
  -h, --help   print this help

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

}  // namespace

int main(int argc, char** argv) {
  std::string_view mode = argc > 1 ? argv[1] : "--settings";
  if (argc > 2) mode = "";
  if (mode == "-h" || mode == "--help") {
    print(stdout, kUsage);
    return kExitOk;
  }
  if (mode == "--version") {
    print(stdout, std::string("loom ") + loom::kVersionString + "\n");
    return kExitOk;
  }
  if (mode == "--settings") return print_settings();
  print(stderr, argc > 2 ? "loom-info: error: too many arguments\n"
                         : "loom-info: error: unknown option '" + std::string(mode) + "'\n");
  print(stderr, "Usage: loom-info [--settings | --version | --help]\n");
  return kExitUsage;
}
