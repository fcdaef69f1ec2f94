// loom-trace: merges the flight records of a job's ranks (LOOM_FLIGHT_DIR) into one report, and
// optionally one Chrome trace. See docs/reliability.md, "Flight recorder".
//
//   loom-trace [--chrome FILE] [--top N] PATH...
//
// PATH: a directory (its loom-flight-*.json files) or a file. Exit status: 0 when the records
// show no problem, 1 when they show one (a rank without a record, a mismatch, a stall), 2 on a
// usage or input error.
#include <fmt/format.h>

#include <cstdlib>
#include <exception>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "tools/loom_trace/chrome.hpp"
#include "tools/loom_trace/records.hpp"
#include "tools/loom_trace/report.hpp"

namespace {

constexpr const char* kUsage =
    "usage: loom-trace [--chrome FILE] [--top N] PATH...\n"
    "  Merges the flight records ranks wrote (LOOM_FLIGHT_DIR=PATH, or saved from\n"
    "  Communicator::flight_record()) per communicator: which ranks wrote one, the first call\n"
    "  on which ranks disagree (MISMATCH) or some wait while others never came (STALLED), which\n"
    "  ranks start calls last, and the slowest calls.\n"
    "  --chrome FILE  also write every rank's calls as a Chrome trace (open it in Perfetto)\n"
    "  --top N        rows of the straggler table, unfinished sends and receives listed\n"
    "                 (default 8)\n"
    "  Exit status: 0 no problem found, 1 a problem found, 2 bad usage or input.\n";

struct Options {
  std::string chrome;
  int top = 8;
  std::vector<std::string> paths;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      std::exit(0);
    } else if (a == "--chrome") {
      o.chrome = value();
    } else if (a == "--top") {
      o.top = std::stoi(value());
      if (o.top < 1) throw std::invalid_argument("--top must be at least 1");
    } else if (!a.empty() && a[0] == '-') {
      throw std::invalid_argument("unknown option " + a);
    } else {
      o.paths.push_back(a);
    }
  }
  if (o.paths.empty()) throw std::invalid_argument("no flight records named");
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    o = parse(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "loom-trace: " << e.what() << "\n" << kUsage;
    return 2;
  }
  try {
    const auto comms = loom::trace::load(o.paths);
    if (comms.empty()) {
      std::cerr << "loom-trace: no loom-flight-*.json files in the paths named\n";
      return 2;
    }
    bool problem = false;
    for (const auto& [id, comm] : comms)
      problem = loom::trace::report(comm, std::cout, o.top) || problem;
    if (!o.chrome.empty()) {
      std::ofstream out(o.chrome);
      loom::trace::write_chrome_trace(comms, out);
      if (!out) throw std::runtime_error("cannot write " + o.chrome);
      std::cout << fmt::format("Chrome trace written to {}\n", o.chrome);
    }
    return problem ? 1 : 0;
  } catch (const std::exception& e) {
    std::cerr << "loom-trace: " << e.what() << "\n";
    return 2;
  }
}
