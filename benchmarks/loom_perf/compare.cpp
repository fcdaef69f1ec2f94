#include "benchmarks/loom_perf/compare.hpp"

#include <fmt/format.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

#include "benchmarks/loom_perf/runner.hpp"
#include "loom/unique_id.hpp"

namespace loom::perf {
namespace {

// Rank 0's address for the per-transport rendezvous: the host of LOOM_ROOT (MASTER_ADDR), which
// every rank reaches, else loopback.
std::string rendezvous_host() {
  for (const char* name : {"LOOM_ROOT", "MASTER_ADDR"}) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') continue;
    std::string s = v;
    if (std::string(name) == "LOOM_ROOT") s = s.substr(0, s.rfind(':'));
    return s + ":0";
  }
  return "127.0.0.1:0";
}

// A fresh communicator over `transport` with the same ranks as `world`.
Communicator derive(Communicator& world, const std::string& transport) {
  std::array<std::uint8_t, UniqueId::kBytes> bytes{};
  if (world.rank() == 0) bytes = UniqueId::create(rendezvous_host()).to_bytes();
  world.broadcast(bytes.data(), bytes.data(), bytes.size(), DataType::Uint8, 0).wait();
  return Communicator(UniqueId::from_bytes(bytes), world.rank(), world.size(),
                      transport_options(transport));
}

double busbw(const RowResult& row) {
  return row.out_of_place.ran ? row.out_of_place.busbw : row.in_place.busbw;
}

std::string json_half(const HalfResult& h) {
  if (!h.ran) return "null";
  return fmt::format(
      R"({{"time_us": {:.3f}, "algbw_gbs": {:.4f}, "busbw_gbs": {:.4f}, "wrong": {}}})",
      h.seconds * 1e6, h.algbw, h.busbw, h.wrong ? std::to_string(*h.wrong) : std::string("null"));
}

void print_table(const Options& options, int nranks, const std::vector<std::string>& transports,
                 const std::vector<std::vector<RowResult>>& runs) {
  fmt::print(
      "# loom-perf {}: {} ranks, transports compared (busbw in GB/s, {}; every result "
      "verified: #wrong summed over transports)\n",
      coll_name(options.coll), nranks, options.run_out_of_place ? "out-of-place" : "in-place");
  std::string head = fmt::format("#{:>12} {:>12} {:>8}", "size", "count", "type");
  for (const auto& t : transports) head += fmt::format(" {:>11}", t + " busbw");
  if (transports.size() >= 2) head += fmt::format(" {:>9}", transports[0] + "/" + transports[1]);
  fmt::print("{} {:>7}\n", head, "#wrong");
  std::uint64_t total_wrong = 0;
  for (std::size_t i = 0; i < runs[0].size(); ++i) {
    const RowResult& r0 = runs[0][i];
    std::string line =
        fmt::format(" {:>12} {:>12} {:>8}", r0.bytes, r0.count, dtype_name(r0.dtype));
    std::uint64_t wrong = 0;
    for (const auto& run : runs) {
      line += fmt::format(" {:>11.3f}", i < run.size() ? busbw(run[i]) : 0.0);
      if (i < run.size())
        wrong += run[i].out_of_place.wrong.value_or(0) + run[i].in_place.wrong.value_or(0);
    }
    if (runs.size() >= 2 && i < runs[1].size()) {
      double b = busbw(runs[1][i]);
      line += b > 0 ? fmt::format(" {:>9.2f}", busbw(runs[0][i]) / b) : fmt::format(" {:>9}", "-");
    }
    total_wrong += wrong;
    fmt::print("{} {:>7}\n", line, wrong);
  }
  fmt::print("# Out of bounds values : {} {}\n", total_wrong, total_wrong == 0 ? "OK" : "FAILED");
  std::fflush(stdout);
}

}  // namespace

CommOptions transport_options(const std::string& transport) {
  CommOptions o;
  o.settings["LOOM_TRANSPORTS"] = transport;
  if (transport == "ofi") o.settings["LOOM_OFI_FALLBACK"] = "false";
  return o;
}

int run_compare(Communicator& world, const Options& options) {
  std::vector<std::vector<RowResult>> runs;
  int status = 0;
  Options quiet = options;
  quiet.print_rows = false;
  for (const std::string& t : options.transports) {
    Communicator comm = derive(world, t);
    Runner runner(comm, quiet);
    status = std::max(status, runner.run());
    runs.push_back(runner.rows());
  }
  if (world.rank() != 0) return status;
  print_table(options, world.size(), options.transports, runs);
  if (!options.json_file.empty())
    write_json(options.json_file, options, world.size(), options.transports, runs);
  return status;
}

void write_json(const std::string& path, const Options& options, int nranks,
                const std::vector<std::string>& transports,
                const std::vector<std::vector<RowResult>>& runs) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error("cannot write " + path);
  out << fmt::format(R"({{"collective": "{}", "nranks": {}, "runs": [)", coll_name(options.coll),
                     nranks);
  for (std::size_t t = 0; t < runs.size(); ++t) {
    out << (t > 0 ? ",\n" : "\n")
        << fmt::format(R"( {{"transport": "{}", "rows": [)",
                       t < transports.size() ? transports[t] : "default");
    for (std::size_t i = 0; i < runs[t].size(); ++i) {
      const RowResult& r = runs[t][i];
      out << (i > 0 ? ",\n" : "\n")
          << fmt::format(
                 R"(  {{"bytes": {}, "count": {}, "type": "{}", "op": "{}", "root": {}, "out_of_place": {}, "in_place": {}}})",
                 r.bytes, r.count, dtype_name(r.dtype), r.op ? op_name(*r.op) : "none", r.root,
                 json_half(r.out_of_place), json_half(r.in_place));
    }
    out << "]}";
  }
  out << "\n]}\n";
  if (!out) throw std::runtime_error("writing " + path + " failed");
}

}  // namespace loom::perf
