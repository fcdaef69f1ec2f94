#include "config/config.hpp"

#include <cctype>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <utility>
#include <vector>

extern char** environ;  // NOLINT(readability-redundant-declaration)

namespace loom::config {
namespace {

std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// Splits "123abc" into 123 and "abc"; fails on no digits or overflow.
Result<std::pair<std::uint64_t, std::string>> split_number(std::string_view text) {
  std::string t = trim(text);
  std::size_t i = 0;
  std::uint64_t v = 0;
  while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) {
    auto d = static_cast<std::uint64_t>(t[i] - '0');
    if (v > (std::numeric_limits<std::uint64_t>::max() - d) / 10)
      return make_error(ErrorCode::InvalidArgument, "'{}' is too large", t);
    v = v * 10 + d;
    ++i;
  }
  if (i == 0) return make_error(ErrorCode::InvalidArgument, "'{}' is not a number", t);
  return std::pair{v, upper(trim(std::string_view(t).substr(i)))};
}

std::string format_size(std::int64_t bytes) {
  for (auto [shift, unit] : {std::pair{40, "T"}, {30, "G"}, {20, "M"}, {10, "K"}}) {
    const std::int64_t step = std::int64_t{1} << shift;
    if (bytes != 0 && bytes % step == 0) return fmt::format("{}{}", bytes / step, unit);
  }
  return std::to_string(bytes);
}

std::string format_duration(std::int64_t ms) {
  for (auto [per, unit] : {std::pair{std::int64_t{3'600'000}, "h"}, {60'000, "m"}, {1000, "s"}}) {
    if (ms != 0 && ms % per == 0) return fmt::format("{}{}", ms / per, unit);
  }
  return fmt::format("{}ms", ms);
}

std::string format_number(Type type, std::int64_t v) {
  if (type == Type::Size) return format_size(v);
  if (type == Type::Duration) return format_duration(v);
  return std::to_string(v);
}

std::string allowed_suffix(const Spec& spec) {
  const std::string allowed = allowed_text(spec);
  return allowed.empty() ? "" : fmt::format("; allowed: {}", allowed);
}

Status type_error(const Spec& spec, const std::string& raw, const Status& why) {
  return make_error(ErrorCode::InvalidUsage, "setting {}='{}' is not a valid {} ({}{})", spec.name,
                    raw, type_name(spec.type), why.message(), allowed_suffix(spec));
}

// The number a valid Int, Size or Duration text stands for (milliseconds for a duration).
Result<std::int64_t> parse_number(Type type, const std::string& raw) {
  switch (type) {
    case Type::Int: return parse_int(raw);
    case Type::Size: {
      LOOM_ASSIGN_OR_RETURN(std::uint64_t v, parse_size(raw));
      if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        return make_error(ErrorCode::InvalidArgument, "'{}' is too large", trim(raw));
      return static_cast<std::int64_t>(v);
    }
    case Type::Duration: {
      LOOM_ASSIGN_OR_RETURN(std::chrono::milliseconds v, parse_duration(raw));
      return static_cast<std::int64_t>(v.count());
    }
    case Type::Bool:
    case Type::String: break;
  }
  return make_error(ErrorCode::Internal, "not a number setting");
}

Status check_number(const Spec& spec, const std::string& raw) {
  auto v = parse_number(spec.type, raw);
  if (!v) return type_error(spec, raw, v.status());
  if (*v >= spec.range.min && *v <= spec.range.max) return Status::ok();
  // A deadline of 0 is the likeliest out-of-range duration: say what it does not mean.
  const bool zero_time = spec.type == Type::Duration && *v == 0;
  return make_error(
      ErrorCode::InvalidUsage, "setting {}='{}' is out of range (allowed: {}){}", spec.name, raw,
      allowed_text(spec),
      zero_time ? "; 0 does not mean \"no deadline\": every wait in loom has one" : "");
}

// The names of `choices`, one by one.
std::vector<std::string_view> choice_names(const Choices& choices) {
  std::vector<std::string_view> names;
  std::string_view rest = choices.names;
  while (!rest.empty()) {
    const std::size_t bar = rest.find('|');
    names.push_back(rest.substr(0, bar));
    rest = bar == std::string_view::npos ? std::string_view() : rest.substr(bar + 1);
  }
  return names;
}

bool is_choice(const Choices& choices, std::string_view word) {
  for (std::string_view name : choice_names(choices))
    if (choices.any_case ? upper(word) == upper(name) : word == name) return true;
  return false;
}

Status check_choice(const Spec& spec, const std::string& raw) {
  const Choices& c = spec.choices;
  if (!c.list) {
    if (is_choice(c, raw)) return Status::ok();
    return make_error(ErrorCode::InvalidUsage, "setting {}='{}' is not {}", spec.name, raw,
                      allowed_text(spec));
  }
  std::string_view rest = raw;
  while (true) {
    const std::size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    if (item.starts_with('^')) item.remove_prefix(1);
    if (!item.empty() && !is_choice(c, item))
      return make_error(ErrorCode::InvalidUsage,
                        "setting {}='{}': '{}' is not a name it knows ({})", spec.name, raw, item,
                        allowed_text(spec));
    if (comma == std::string_view::npos) return Status::ok();
    rest.remove_prefix(comma + 1);
  }
}

Status validate(const Spec& spec, const std::string& raw) {
  switch (spec.type) {
    case Type::Int:
    case Type::Size:
    case Type::Duration: return check_number(spec, raw);
    case Type::Bool: {
      auto r = parse_bool(raw);
      return r ? Status::ok() : type_error(spec, raw, r.status());
    }
    case Type::String: return spec.choices.names.empty() ? Status::ok() : check_choice(spec, raw);
  }
  return Status::ok();
}

[[noreturn]] void misuse(std::string_view name, const char* what) {
  // A programming error inside loom (undeclared or mistyped setting), never a user error.
  throw std::logic_error(fmt::format("loom config: setting {} {}", name, what));
}

}  // namespace

std::string_view type_name(Type t) {
  switch (t) {
    case Type::Int: return "integer";
    case Type::Bool: return "boolean";
    case Type::Size: return "size";
    case Type::Duration: return "duration";
    case Type::String: return "string";
  }
  return "?";
}

std::string_view source_name(Source s) {
  switch (s) {
    case Source::Default: return "default";
    case Source::Environment: return "environment";
    case Source::Override: return "option";
  }
  return "?";
}

std::string allowed_text(const Spec& spec) {
  switch (spec.type) {
    case Type::Int:
    case Type::Size:
    case Type::Duration:
      return fmt::format("{} to {}", format_number(spec.type, spec.range.min),
                         format_number(spec.type, spec.range.max));
    case Type::Bool: return "";
    case Type::String: break;
  }
  if (spec.choices.names.empty()) return "";
  std::string names;
  for (std::string_view name : choice_names(spec.choices))
    names += fmt::format("{}{}", names.empty() ? "" : ", ", name);
  if (spec.choices.list)
    return fmt::format("a comma-separated list of {}; ^NAME excludes one", names);
  return fmt::format("one of {}", names);
}

Status check_timeout(std::string_view what, std::chrono::milliseconds timeout) {
  if (timeout.count() >= 1 && timeout <= kMaxTimeout) return Status::ok();
  return make_error(
      ErrorCode::InvalidArgument, "{} of {} ms is out of range (allowed: 1ms to {}){}", what,
      timeout.count(), format_duration(kMaxTimeout.count()),
      timeout.count() == 0 ? "; 0 does not mean \"no deadline\": every wait in loom has one" : "");
}

const Spec* find_spec(std::string_view name) {
  for (const Spec& s : all_settings())
    if (s.name == name) return &s;
  return nullptr;
}

Result<std::int64_t> parse_int(std::string_view text) {
  std::string t = trim(text);
  bool neg = !t.empty() && t[0] == '-';
  auto r = split_number(neg ? std::string_view(t).substr(1) : std::string_view(t));
  if (!r) return r.status();
  if (!r->second.empty())
    return make_error(ErrorCode::InvalidArgument, "'{}' is not an integer", t);
  if (r->first > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
    return make_error(ErrorCode::InvalidArgument, "'{}' is too large", t);
  auto v = static_cast<std::int64_t>(r->first);
  return neg ? -v : v;
}

Result<bool> parse_bool(std::string_view text) {
  std::string t = upper(trim(text));
  if (t == "1" || t == "TRUE" || t == "YES" || t == "ON") return true;
  if (t == "0" || t == "FALSE" || t == "NO" || t == "OFF") return false;
  return make_error(ErrorCode::InvalidArgument,
                    "'{}' is not one of 1/0, true/false, yes/no, on/off", trim(text));
}

Result<std::uint64_t> parse_size(std::string_view text) {
  auto r = split_number(text);
  if (!r) return r.status();
  auto [v, unit] = *r;
  if (!unit.empty() && unit.back() == 'B') unit.pop_back();
  if (!unit.empty() && unit.back() == 'I') unit.pop_back();
  unsigned shift = 0;
  if (unit.empty())
    shift = 0;
  else if (unit == "K")
    shift = 10;
  else if (unit == "M")
    shift = 20;
  else if (unit == "G")
    shift = 30;
  else if (unit == "T")
    shift = 40;
  else
    return make_error(ErrorCode::InvalidArgument, "unknown size unit in '{}' (use K, M, G, T)",
                      trim(text));
  if (shift > 0 && v > (std::numeric_limits<std::uint64_t>::max() >> shift))
    return make_error(ErrorCode::InvalidArgument, "'{}' is too large", trim(text));
  return v << shift;
}

Result<std::chrono::milliseconds> parse_duration(std::string_view text) {
  auto r = split_number(text);
  if (!r) return r.status();
  auto [v, unit] = *r;
  std::uint64_t ms_per = 0;
  if (unit.empty() || unit == "S")
    ms_per = 1000;
  else if (unit == "MS")
    ms_per = 1;
  else if (unit == "M" || unit == "MIN")
    ms_per = 60'000;
  else if (unit == "H")
    ms_per = 3'600'000;
  else
    return make_error(ErrorCode::InvalidArgument, "unknown duration unit in '{}' (use ms, s, m, h)",
                      trim(text));
  if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) / ms_per)
    return make_error(ErrorCode::InvalidArgument, "'{}' is too long", trim(text));
  return std::chrono::milliseconds(static_cast<std::int64_t>(v * ms_per));
}

Result<Config> Config::load(const std::map<std::string, std::string>& overrides) {
  Config c;
  for (const Spec& spec : all_settings()) {
    Value v;
    if (auto it = overrides.find(std::string(spec.name)); it != overrides.end()) {
      v = {it->second, Source::Override, true};
    } else if (const char* env = std::getenv(std::string(spec.name).c_str()); env && *env) {
      v = {env, Source::Environment, true};
    } else if (!spec.default_value.empty()) {
      v = {std::string(spec.default_value), Source::Default, true};
    }
    if (v.set) LOOM_RETURN_IF_ERROR(validate(spec, v.raw));
    c.values_.emplace(std::string(spec.name), std::move(v));
  }
  for (const auto& [name, value] : overrides)
    if (!find_spec(name))
      return make_error(ErrorCode::InvalidArgument,
                        "unknown setting '{}' in CommOptions.settings "
                        "(`loom-info` lists every setting)",
                        name);
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    std::string_view name = kv.substr(0, kv.find('='));
    if (name.starts_with("LOOM_") && !find_spec(name)) c.unknown_.emplace_back(name);
  }
  return c;
}

const Config::Value& Config::value_of(std::string_view name, Type expected) const {
  const Spec* spec = find_spec(name);
  if (!spec) misuse(name, "is not declared in settings.cpp");
  if (spec->type != expected) misuse(name, "is read with the wrong type");
  auto it = values_.find(name);
  return it->second;
}

std::int64_t Config::get_int(std::string_view name) const {
  const Value& v = value_of(name, Type::Int);
  return v.set ? parse_int(v.raw).value() : 0;
}
bool Config::get_bool(std::string_view name) const {
  const Value& v = value_of(name, Type::Bool);
  return v.set && parse_bool(v.raw).value();
}
std::uint64_t Config::get_size(std::string_view name) const {
  const Value& v = value_of(name, Type::Size);
  return v.set ? parse_size(v.raw).value() : 0;
}
std::chrono::milliseconds Config::get_duration(std::string_view name) const {
  const Value& v = value_of(name, Type::Duration);
  return v.set ? parse_duration(v.raw).value() : std::chrono::milliseconds(0);
}
std::string Config::get_string(std::string_view name) const {
  return value_of(name, Type::String).raw;
}
bool Config::has(std::string_view name) const {
  auto it = values_.find(name);
  if (it == values_.end()) misuse(name, "is not declared in settings.cpp");
  return it->second.set;
}
Source Config::source(std::string_view name) const {
  auto it = values_.find(name);
  if (it == values_.end()) misuse(name, "is not declared in settings.cpp");
  return it->second.source;
}
std::string Config::raw(std::string_view name) const {
  auto it = values_.find(name);
  if (it == values_.end()) misuse(name, "is not declared in settings.cpp");
  return it->second.raw;
}

}  // namespace loom::config
