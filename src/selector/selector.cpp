#include "selector/selector.hpp"

#include <fmt/format.h>

#include "selector/catalog.hpp"

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
  const AlgoRow* r = find_row(s);
  if (r != nullptr && r->by_cost) return std::optional<Algo>{r->algo};
  return make_error(ErrorCode::InvalidUsage, "LOOM_ALGO: '{}' is not one of auto, {}", s,
                    algo_names());
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
    if (item.front() == '^') {
      const AlgoRow* r = find_row(trim(item.substr(1)));
      if (r == nullptr || !r->by_cost)
        return make_error(ErrorCode::InvalidUsage, "LOOM_ALGO: '{}' is not one of {}",
                          item.substr(1), algo_names());
      p.excluded[static_cast<std::size_t>(r->algo)] = true;
      continue;
    }
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

std::string Decision::describe(Coll c, std::size_t bytes, const Shape& s) const {
  std::string times;
  for (const AlgoRow& r : catalog()) {
    const double t = us_of(r.algo);
    if (!r.by_cost || t < 0 || t >= kNever) continue;
    times += fmt::format("{}{} {:.1f} us", times.empty() ? "" : ", ", r.name, t);
  }
  std::string why = refused == nullptr ? "" : fmt::format("; forced one refused: {}", refused);
  return fmt::format("{} of {} B on {} ranks ({} hosts): {} -> {} ({}{})", to_string(c), bytes,
                     s.nranks, s.nhosts, times, to_string(algo), forced ? "forced" : "auto", why);
}

Decision choose(Coll c, std::size_t bytes, const CostTable& table, std::optional<Algo> forced,
                const AlgoMask& excluded) {
  Decision d;
  for (const AlgoRow& r : catalog())
    d.us[static_cast<std::size_t>(r.algo)] = table.time_us(c, r.algo, bytes);
  if (forced && supports(c, *forced)) {
    d.refused = row(*forced).unfit(table.shape());
    if (d.refused == nullptr) {
      d.algo = *forced;
      d.forced = true;
      return d;
    }
  }
  d.algo = Algo::Ring;
  for (const AlgoRow& r : catalog()) {
    const double t = d.us_of(r.algo);
    const bool left_out = excluded[static_cast<std::size_t>(r.algo)];
    if (r.by_cost && !left_out && t >= 0 && t < d.pick_us()) d.algo = r.algo;
  }
  return d;
}

}  // namespace loom::select
