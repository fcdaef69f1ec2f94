#include "tools/loom_sim/cluster.hpp"

#include <algorithm>

#include "algorithms/tree.hpp"
#include "selector/selector.hpp"

namespace loom::sim {

std::vector<std::string_view> preset_names() {
  return {"8gpu-4efa", "25gbe", "local"};
}

Result<Cluster> preset(std::string_view name, const Tuning& local, int local_cores) {
  Cluster c;
  c.name = std::string(name);
  if (name == "8gpu-4efa") {
    c.description = "8 ranks per host on NVLink-class links; 4 x 100 Gb/s EFA per host";
    c.per_host = 8;
    c.ofi = true;
    c.tuning.intra = {3, 120};
    c.tuning.inter = {18, 12.5};
    c.tuning.nic_gbps = 50;
    c.tuning.reduce_gbps = 500;
  } else if (name == "25gbe") {
    c.description = "8 ranks per host over shared memory; one 25 Gb/s Ethernet port per host";
    c.per_host = 8;
    c.tuning.intra = {4, 8};
    c.tuning.inter = {40, 2.9};
    c.tuning.nic_gbps = 2.9;
    c.tuning.reduce_gbps = 8;
  } else if (name == "local") {
    c.description = "this machine: every rank on one host, calibrated constants (LOOM_TUNING)";
    c.per_host = 0;
    c.cores = local_cores;
    c.tuning = local;
  } else {
    return make_error(ErrorCode::InvalidArgument, "unknown preset '{}' (8gpu-4efa, 25gbe, local)",
                      name);
  }
  return c;
}

Shape shape_of(const Cluster& c, int nranks) {
  Shape s;
  s.nranks = nranks;
  s.per_host = c.per_host <= 0 ? nranks : std::min(c.per_host, nranks);
  s.nhosts = (nranks + s.per_host - 1) / s.per_host;
  s.cores = c.cores;
  s.uneven = nranks % s.per_host != 0;
  // The trees loom builds for this layout (flat, or chains per host below trees of leaders).
  std::vector<std::vector<int>> hosts(static_cast<std::size_t>(s.nhosts));
  for (int r = 0; r < nranks; ++r) hosts[static_cast<std::size_t>(r / s.per_host)].push_back(r);
  algo::DoubleTree dt = s.nhosts > 1 && s.per_host > 1 ? algo::host_double_tree(hosts)
                                                       : algo::double_binary_tree(nranks);
  s.tree_depth = std::max(dt.trees[0].depth(), dt.trees[1].depth()) - 1;
  return s;
}

Prediction predict(Coll coll, std::size_t bytes, const CostTable& table) {
  Prediction out;
  out.bytes = bytes;
  const select::Decision d = select::choose(coll, bytes, table, std::nullopt);
  out.ring_us = d.us_of(Algo::Ring);
  out.tree_us = d.us_of(Algo::Tree);
  out.hier_us = d.us_of(Algo::Hier);
  out.bruck_us = d.us_of(Algo::Bruck);
  out.pick = d.algo;
  out.pick_us = d.pick_us();
  if (select::supports(coll, Algo::Deterministic))
    out.det_us = table.time_us(coll, Algo::Deterministic, bytes);
  return out;
}

}  // namespace loom::sim
