#include "selector/tuning.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

#include "selector/plan_policy.hpp"

namespace loom::select {
namespace {

// A key and where its value lives in a Tuning.
struct Field {
  using Number = double* (*)(Tuning&);
  using Points = Curve* (*)(Tuning&);
  Field(std::string_view k, Number n) : key(k), number(n) {}
  Field(std::string_view k, Points p) : key(k), curve(p) {}
  std::string_view key;
  Number number = nullptr;
  Points curve = nullptr;
};

const std::vector<Field>& fields() {
  static const std::vector<Field> f = {
      {"intra_alpha_us", [](Tuning& t) { return &t.intra.alpha_us; }},
      {"intra_gbps", [](Tuning& t) { return &t.intra.gbps; }},
      {"inter_alpha_us", [](Tuning& t) { return &t.inter.alpha_us; }},
      {"inter_gbps", [](Tuning& t) { return &t.inter.gbps; }},
      {"nic_gbps", [](Tuning& t) { return &t.nic_gbps; }},
      {"nic_burst_bytes", [](Tuning& t) { return &t.nic_burst_bytes; }},
      {"reduce_gbps", [](Tuning& t) { return &t.reduce_gbps; }},
      {"oversub_alpha_us", [](Tuning& t) { return &t.shared.alpha_us; }},
      {"oversub_gbps", [](Tuning& t) { return &t.shared.gbps; }},
      {"oversub_cache_gbps", [](Tuning& t) { return &t.shared.cache_gbps; }},
      {"oversub_dram_bytes", [](Tuning& t) { return &t.shared.dram_bytes; }},
      {"oversub_turn_us", [](Tuning& t) { return &t.shared.turn_us; }},
      {"intra_cache_gbps", [](Tuning& t) { return &t.host.cache_gbps; }},
      {"intra_eager_gbps", [](Tuning& t) { return &t.host.eager_gbps; }},
      {"cache_bytes", [](Tuning& t) { return &t.host.cache_bytes; }},
      {"core_cache_bytes", [](Tuning& t) { return &t.shared.core_cache_bytes; }},
      {"dram_bytes", [](Tuning& t) { return &t.host.dram_bytes; }},
      {"fused_reduce", [](Tuning& t) { return &t.fused_reduce; }},
      {"rd_max_bytes", [](Tuning& t) { return &t.rd_max_bytes; }},
      {"intra_curve", [](Tuning& t) { return &t.host.curve; }},
      {"oversub_curve", [](Tuning& t) { return &t.shared.curve; }},
      {"rd_round_curve", [](Tuning& t) { return &t.rd_round_curve; }},
      {"intra_eager_curve", [](Tuning& t) { return &t.host.eager_curve; }},
  };
  return f;
}

Result<double> parse_number(std::string_view key, std::string_view val) {
  double v = 0;
  auto [end, ec] = std::from_chars(val.data(), val.data() + val.size(), v);
  if (ec != std::errc{} || end != val.data() + val.size() || !(v >= 0) || !std::isfinite(v))
    return make_error(ErrorCode::InvalidUsage, "tuning value '{}' for {} is not a number >= 0", val,
                      key);
  return v;
}

// The LOOM_TUNING line of a file `loom-perf --calibrate` wrote: its lines that are not comments,
// joined, without a leading "LOOM_TUNING=".
Result<std::string> read_calibration(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return make_error(ErrorCode::InvalidUsage, "LOOM_TUNING=@{}: cannot read the file", path);
  std::string line, out;
  while (std::getline(in, line)) {
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    if (line.empty() || line.front() == '#') continue;
    if (line.starts_with("LOOM_TUNING=")) line.erase(0, 12);
    out += (out.empty() ? "" : ",") + line;
  }
  return out;
}

}  // namespace

// The points around `bytes` (>= the first point's; at least two points): the last segment
// beyond the last point.
std::pair<Curve::Point, Curve::Point> Curve::segment(double bytes) const {
  auto hi = std::upper_bound(points.begin(), points.end(), bytes,
                             [](double b, const Point& p) { return b < p.first; });
  if (hi == points.end()) --hi;
  return {*(hi - 1), *hi};
}

double Curve::at(double bytes) const {
  if (points.empty()) return 0;
  if (bytes <= points.front().first) return points.front().second;
  if (bytes >= points.back().first) return points.back().second;
  const auto [lo, hi] = segment(bytes);
  const double f = std::log2(bytes / lo.first) / std::log2(hi.first / lo.first);
  return lo.second + f * (hi.second - lo.second);
}

double Curve::linear_at(double bytes) const {
  if (points.empty()) return 0;
  if (points.size() == 1 || bytes <= points.front().first) return points.front().second;
  const auto [lo, hi] = segment(bytes);
  return lo.second + (bytes - lo.first) * (hi.second - lo.second) / (hi.first - lo.first);
}

std::string Curve::to_string() const {
  std::string out;
  for (const auto& [bytes, value] : points)
    out += fmt::format("{}{:.0f}:{:.4g}", out.empty() ? "" : "/", bytes, value);
  return out;
}

Status Curve::parse(std::string_view text) {
  std::vector<std::pair<double, double>> parsed;
  while (!text.empty()) {
    const std::size_t slash = text.find('/');
    const std::string_view item = text.substr(0, slash);
    text = slash == std::string_view::npos ? std::string_view{} : text.substr(slash + 1);
    const std::size_t colon = item.find(':');
    if (colon == std::string_view::npos)
      return make_error(ErrorCode::InvalidUsage, "curve point '{}' is not bytes:value", item);
    LOOM_ASSIGN_OR_RETURN(const double bytes,
                          parse_number(fmt::format("point '{}'", item), item.substr(0, colon)));
    LOOM_ASSIGN_OR_RETURN(const double value,
                          parse_number(fmt::format("point '{}'", item), item.substr(colon + 1)));
    if (bytes <= 0 || value <= 0 || (!parsed.empty() && bytes <= parsed.back().first))
      return make_error(ErrorCode::InvalidUsage,
                        "curve point '{}': sizes must increase and values be positive", item);
    parsed.emplace_back(bytes, value);
  }
  points = std::move(parsed);
  return Status::ok();
}

double HostRates::fall(double bytes, double near, double far, double dram) const {
  if (bytes <= cache_bytes) return near;
  if (dram <= cache_bytes || bytes >= dram) return far;
  const double f = std::log2(bytes / cache_bytes) / std::log2(dram / cache_bytes);
  return near + f * (far - near);
}

Tuning with_network(Tuning t, double link_gbps, int links, double burst_bytes) {
  if (t.nic_gbps > 0 || link_gbps <= 0 || links <= 0) return t;
  t.line_gbps = t.inter.gbps;
  if (t.nic_burst_bytes <= 0) t.nic_burst_bytes = burst_bytes;
  t.inter.gbps = std::min(t.inter.gbps, link_gbps);
  t.nic_gbps = link_gbps * links;
  return t;
}

std::vector<std::string_view> tuning_keys() {
  std::vector<std::string_view> keys;
  for (const Field& f : fields()) keys.push_back(f.key);
  return keys;
}

std::string Tuning::to_string() const {
  std::string out;
  Tuning copy = *this;
  for (const Field& f : fields()) {
    if (!out.empty()) out += ",";
    if (f.curve)
      out += fmt::format("{}={}", f.key, f.curve(copy)->to_string());
    else
      out += fmt::format("{}={:.4g}", f.key, *f.number(copy));
  }
  return out;
}

Status Tuning::apply(std::string_view text) {
  while (!text.empty()) {
    std::size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    if (item.empty()) continue;
    std::size_t eq = item.find('=');
    if (eq == std::string_view::npos)
      return make_error(ErrorCode::InvalidUsage, "tuning entry '{}' is not key=value", item);
    std::string_view key = item.substr(0, eq), val = item.substr(eq + 1);
    auto it = std::find_if(fields().begin(), fields().end(),
                           [&](const Field& f) { return f.key == key; });
    if (it == fields().end())
      return make_error(ErrorCode::InvalidUsage, "unknown tuning key '{}' (known: {})", key,
                        Tuning{}.to_string());
    if (it->curve) {
      if (Status st = it->curve(*this)->parse(val); !st.is_ok())
        return make_error(ErrorCode::InvalidUsage, "{}: {}", key, st.message());
      continue;
    }
    LOOM_ASSIGN_OR_RETURN(const double v, parse_number(key, val));
    if ((key == "intra_gbps" || key == "inter_gbps" || key == "reduce_gbps") && v <= 0)
      return make_error(ErrorCode::InvalidUsage, "tuning value for {} must be positive", key);
    *it->number(*this) = v;
  }
  return Status::ok();
}

Result<Tuning> tuning_from(const config::Config& cfg) {
  Tuning t;
  // Every key's default is the setting LOOM_TUNE_<KEY>.
  std::string base;
  for (std::string_view key : tuning_keys()) {
    std::string name = "LOOM_TUNE_";
    for (char c : key) name += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    base += fmt::format("{}{}={}", base.empty() ? "" : ",", key, cfg.get_string(name));
  }
  LOOM_RETURN_IF_ERROR(t.apply(base));
  std::string over = cfg.get_string("LOOM_TUNING");
  if (over.starts_with("@")) {
    LOOM_ASSIGN_OR_RETURN(over, read_calibration(over.substr(1)));
  }
  LOOM_RETURN_IF_ERROR(t.apply(over));
  return t;
}

}  // namespace loom::select
