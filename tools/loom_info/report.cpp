#include "report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "text.hpp"

namespace loom::info {
namespace {

using config::Config;
using config::Spec;

constexpr std::string_view kNone = "-";
constexpr std::size_t kDescriptionIndent = 6;

// Settings whose values are secrets: loom-info says that they are set, not what they are.
bool is_secret(std::string_view name) {
  return name == "LOOM_SECRET" || name == "LOOM_ID";
}

struct Row {
  std::string name, type, default_value, source, value;
};

Row make_row(const Config& config, const Spec& spec) {
  Row row;
  row.name = spec.name;
  row.type = config::type_name(spec.type);
  row.default_value = spec.default_value.empty() ? kNone : spec.default_value;
  const bool set = config.has(spec.name);
  row.source = set ? config::source_name(config.source(spec.name)) : "unset";
  const std::string raw = config.raw(spec.name);
  if (!set) {
    row.value = kNone;
  } else if (is_secret(spec.name)) {
    row.value = fmt::format("(hidden: {} characters)", raw.size());
  } else {
    row.value = raw;
  }
  return row;
}

// Column widths: the widest entry of each column (the value column is last and not padded).
std::array<std::size_t, 4> column_widths(const std::vector<Row>& rows, const Row& header) {
  std::array<std::size_t, 4> w = {header.name.size(), header.type.size(),
                                  header.default_value.size(), header.source.size()};
  for (const Row& r : rows) {
    w[0] = std::max(w[0], r.name.size());
    w[1] = std::max(w[1], r.type.size());
    w[2] = std::max(w[2], r.default_value.size());
    w[3] = std::max(w[3], r.source.size());
  }
  return w;
}

std::string format_row(const Row& r, const std::array<std::size_t, 4>& w) {
  constexpr std::size_t kGap = 2;
  return fmt::format("  {}{}{}{}{}\n", pad(r.name, w[0] + kGap), pad(r.type, w[1] + kGap),
                     pad(r.default_value, w[2] + kGap), pad(r.source, w[3] + kGap), r.value);
}

std::string format_description(std::string_view description, std::size_t width) {
  std::string out;
  const std::size_t room = width > kDescriptionIndent + 20 ? width - kDescriptionIndent : 20;
  for (const std::string& line : wrap(description, room))
    out += fmt::format("{:{}}{}\n", "", kDescriptionIndent, line);
  return out;
}

// The groups in the order their first setting is declared.
std::vector<std::string_view> groups_in_order() {
  std::vector<std::string_view> groups;
  for (const Spec& spec : config::all_settings())
    if (std::find(groups.begin(), groups.end(), spec.group) == groups.end())
      groups.push_back(spec.group);
  return groups;
}

}  // namespace

std::string settings_report(const Config& config, std::size_t width) {
  const Row header{"SETTING", "TYPE", "DEFAULT", "SOURCE", "VALUE"};
  std::vector<Row> rows;
  for (const Spec& spec : config::all_settings()) rows.push_back(make_row(config, spec));
  const auto widths = column_widths(rows, header);

  std::string out = format_row(header, widths);
  for (std::string_view group : groups_in_order()) {
    out += fmt::format("\n{}:\n", group);
    std::size_t i = 0;
    for (const Spec& spec : config::all_settings()) {
      const Row& row = rows[i++];
      if (spec.group != group) continue;
      out += format_row(row, widths);
      out += format_description(spec.description, width);
      // Config::load refuses values outside this (loom-info then exits 1, naming it).
      if (const std::string allowed = config::allowed_text(spec); !allowed.empty())
        out += format_description("Allowed: " + allowed + ".", width);
    }
  }
  return out;
}

std::string_view closest_setting(std::string_view name) {
  constexpr std::size_t kMaxEdits = 2;
  std::string_view best;
  std::size_t best_distance = kMaxEdits + 1;
  for (const Spec& spec : config::all_settings()) {
    std::size_t d = edit_distance(name, spec.name);
    if (d < best_distance) {
      best = spec.name;
      best_distance = d;
    }
  }
  return best;
}

std::vector<std::string> unknown_variable_warnings(const Config& config) {
  std::vector<std::string> warnings;
  for (const std::string& name : config.unknown_variables()) {
    std::string line = fmt::format("warning: {} is set but is not a loom setting", name);
    if (std::string_view near = closest_setting(name); !near.empty())
      line += fmt::format(" (did you mean {}?)", near);
    warnings.push_back(std::move(line));
  }
  return warnings;
}

}  // namespace loom::info
