#include "selector/selector.hpp"

#include <fmt/format.h>

namespace loom::select {
namespace {

constexpr std::array<Coll, kColls> kAllColls = {Coll::AllReduce, Coll::AllGather,
                                                Coll::ReduceScatter, Coll::Broadcast, Coll::Reduce};

std::optional<Coll> parse_coll(std::string_view s) {
  for (Coll c : kAllColls)
    if (to_string(c) == s) return c;
  if (s == "reducescatter" || s == "reduce-scatter") return Coll::ReduceScatter;
  return std::nullopt;
}

Result<std::optional<Algo>> parse_algo(std::string_view s) {
  if (s == "auto") return std::optional<Algo>{};
  if (s == "ring") return std::optional<Algo>{Algo::Ring};
  if (s == "tree") return std::optional<Algo>{Algo::Tree};
  if (s == "rd" || s == "recursive_doubling") return std::optional<Algo>{Algo::Rd};
  return make_error(ErrorCode::InvalidUsage, "LOOM_ALGO: '{}' is not one of auto, ring, tree, rd",
                    s);
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

}  // namespace

Result<Policy> Policy::parse(std::string_view text) {
  Policy p;
  while (!text.empty()) {
    std::size_t comma = text.find(',');
    std::string_view item = trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    if (item.empty()) continue;
    std::size_t colon = item.find(':');
    if (colon == std::string_view::npos) {  // applies to every collective that has it
      LOOM_ASSIGN_OR_RETURN(auto a, parse_algo(item));
      for (Coll c : kAllColls)
        p.forced[static_cast<std::size_t>(c)] = a && supports(c, *a) ? a : std::nullopt;
      continue;
    }
    auto c = parse_coll(trim(item.substr(0, colon)));
    if (!c)
      return make_error(ErrorCode::InvalidUsage,
                        "LOOM_ALGO: '{}' is not a collective (allreduce, allgather, "
                        "reduce_scatter, broadcast, reduce)",
                        item.substr(0, colon));
    LOOM_ASSIGN_OR_RETURN(auto a, parse_algo(trim(item.substr(colon + 1))));
    if (a && !supports(*c, *a))
      return make_error(ErrorCode::InvalidUsage, "LOOM_ALGO: {} has no {} schedule", to_string(*c),
                        to_string(*a));
    p.forced[static_cast<std::size_t>(*c)] = a;
  }
  return p;
}

double Decision::pick_us() const {
  if (algo == Algo::Tree) return tree_us;
  if (algo == Algo::Rd) return rd_us;
  return ring_us;
}

std::string Decision::describe(Coll c, std::size_t bytes, const Shape& s) const {
  std::string tree = tree_us < 0 ? "" : fmt::format(", tree {:.1f} us", tree_us);
  std::string rd = rd_us < 0 || rd_us >= kNever ? "" : fmt::format(", rd {:.1f} us", rd_us);
  return fmt::format("{} of {} B on {} ranks ({} hosts): ring {:.1f} us{}{} -> {} ({})",
                     to_string(c), bytes, s.nranks, s.nhosts, ring_us, tree, rd, to_string(algo),
                     forced ? "forced" : "auto");
}

Decision choose(Coll c, std::size_t bytes, const CostTable& table, std::optional<Algo> forced) {
  Decision d;
  d.ring_us = table.time_us(c, Algo::Ring, bytes);
  d.tree_us = table.time_us(c, Algo::Tree, bytes);
  d.rd_us = table.time_us(c, Algo::Rd, bytes);
  if (forced && supports(c, *forced)) {
    d.algo = *forced;
    d.forced = true;
    return d;
  }
  d.algo = d.tree_us >= 0 && d.tree_us < d.ring_us ? Algo::Tree : Algo::Ring;
  if (d.rd_us >= 0 && d.rd_us < d.pick_us()) d.algo = Algo::Rd;
  return d;
}

}  // namespace loom::select
