#include "selector/catalog.hpp"

#include <array>
#include <string>

namespace loom::select {
namespace {

bool all_colls(Coll) {
  return true;
}
bool allreduce_only(Coll c) {
  return c == Coll::AllReduce;
}
bool rooted_or_allreduce(Coll c) {
  return c == Coll::AllReduce || c == Coll::Broadcast || c == Coll::Reduce;
}
bool hier_colls(Coll c) {
  return c == Coll::AllReduce || c == Coll::AllGather || c == Coll::ReduceScatter;
}
bool gathers_and_scatters(Coll c) {
  return c == Coll::AllGather || c == Coll::ReduceScatter;
}
bool reductions(Coll c) {
  return c == Coll::AllReduce || c == Coll::Reduce || c == Coll::ReduceScatter;
}

const char* fits_any(const Shape&) {
  return nullptr;
}
const char* hier_unfit(const Shape& s) {
  if (s.nhosts < 2) return "one host";
  if (s.uneven) return "the hosts hold different numbers of ranks";
  if (s.per_host < 2) return "one rank per host (the ring)";
  return nullptr;
}

double per_rank(Coll, const Shape& s) {
  return s.nranks;
}
double ring_divisor(Coll c, const Shape& s) {
  return c == Coll::Broadcast || c == Coll::Reduce ? 1 : s.nranks;
}
double halves(Coll, const Shape&) {
  return 2;
}
double whole(Coll, const Shape&) {
  return 1;
}

double unlimited(const Tuning&) {
  return kNever;
}
double rd_limit(const Tuning& t) {
  return t.rd_max_bytes;
}
// Bruck's rounds are not pipelined and its reduce-scatter keeps about twice its input in
// scratch; above this the ring moves as many bytes per NIC or fewer.
double bruck_limit(const Tuning&) {
  return 16.0 * 1024 * 1024;
}

constexpr std::array<AlgoRow, kAlgos> kRows = {{
    {Algo::Ring, "ring", "",
     "host-ordered ring (allreduce: reduce-scatter + allgather); "
     "pipelined chain for broadcast and reduce",
     true, all_colls, fits_any, cost::ring, ring_divisor, unlimited},
    {Algo::Tree, "tree", "",
     "double binary trees (per host: chains below trees of the hosts' "
     "leaders)",
     true, rooted_or_allreduce, fits_any, cost::tree, halves, unlimited},
    {Algo::Deterministic, "deterministic", "", "reductions in rank order (LOOM_DETERMINISTIC)",
     false, reductions, fits_any, cost::deterministic, per_rank, unlimited},
    {Algo::Rd, "rd", "recursive_doubling", "recursive doubling: log2(n) whole-buffer exchanges",
     true, allreduce_only, fits_any, cost::rd, whole, rd_limit},
    {Algo::Hier, "hier", "hierarchical",
     "reduce-scatter in each host, ring allreduce of each local rank's shard across hosts, "
     "allgather in each host (allgather, reduce_scatter: the across and inside halves)",
     true, hier_colls, hier_unfit, cost::hier, per_rank, unlimited},
    {Algo::Bruck, "bruck", "log",
     "Bruck's log-depth allgather and its mirror reduce-scatter: ceil(log2 n) rounds of up to "
     "half the buffer",
     true, gathers_and_scatters, fits_any, cost::bruck, halves, bruck_limit},
}};

constexpr bool rows_in_order() {
  for (std::size_t i = 0; i < kRows.size(); ++i)
    if (static_cast<std::size_t>(kRows[i].algo) != i) return false;
  return true;
}
static_assert(rows_in_order(), "the catalog lists every coll::Algo once, in order");

}  // namespace

std::span<const AlgoRow> catalog() {
  return kRows;
}

const AlgoRow& row(Algo a) {
  return kRows[static_cast<std::size_t>(a)];
}

const AlgoRow* find_row(std::string_view name) {
  for (const AlgoRow& r : kRows)
    if (r.name == name || (!r.alias.empty() && r.alias == name)) return &r;
  return nullptr;
}

std::string_view algo_names() {
  static const std::string names = [] {
    std::string out;
    for (const AlgoRow& r : kRows)
      if (r.by_cost) out += (out.empty() ? "" : ", ") + std::string(r.name);
    return out;
  }();
  return names;
}

}  // namespace loom::select
