#include "options.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "config/config.hpp"

namespace loom::run {
namespace {

enum class Opt {
  Ranks,
  Env,
  Root,
  NoPrefix,
  OnlyRank,
  Timeout,
  Grace,
  Hosts,
  Nics,
  NicRate,
  CpuBind,
  Help
};

struct OptDef {
  std::string_view name;
  Opt id;
  bool takes_value;
};

constexpr std::array kOptions = {
    OptDef{"-n", Opt::Ranks, true},
    OptDef{"--np", Opt::Ranks, true},
    OptDef{"-np", Opt::Ranks, true},
    OptDef{"-x", Opt::Env, true},
    OptDef{"--root", Opt::Root, true},
    OptDef{"--no-prefix", Opt::NoPrefix, false},
    OptDef{"--only-rank", Opt::OnlyRank, true},
    OptDef{"--timeout", Opt::Timeout, true},
    OptDef{"--grace", Opt::Grace, true},
    OptDef{"--hosts", Opt::Hosts, true},
    OptDef{"--nics", Opt::Nics, true},
    OptDef{"--nic-rate", Opt::NicRate, true},
    OptDef{"--cpu-bind", Opt::CpuBind, true},
    OptDef{"-h", Opt::Help, false},
    OptDef{"--help", Opt::Help, false},
};

// Rank-identity variables that loomrun alone decides.
constexpr std::array<std::string_view, 4> kReservedNames = {"LOOM_RANK", "LOOM_WORLD_SIZE",
                                                            "LOOM_LOCAL_RANK", "LOOM_LOCAL_SIZE"};

// An argument split into the option name and a value given in the same argument
// ("--timeout=5", "-n4", "-xA=1").
struct SplitArg {
  std::string_view name;
  std::optional<std::string_view> value;
};

SplitArg split_arg(std::string_view arg) {
  if (arg.starts_with("--")) {
    auto eq = arg.find('=');
    if (eq == std::string_view::npos) return {arg, std::nullopt};
    return {arg.substr(0, eq), arg.substr(eq + 1)};
  }
  if (arg == "-np" || arg.size() <= 2) return {arg, std::nullopt};
  return {arg.substr(0, 2), arg.substr(2)};
}

const OptDef* find_option(std::string_view name) {
  for (const OptDef& def : kOptions)
    if (def.name == name) return &def;
  return nullptr;
}

std::optional<int> parse_int(std::string_view text) {
  int v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

// A tc rate: digits, then kbit, mbit or gbit (what --nic-rate documents).
bool valid_rate(std::string_view v) {
  std::size_t digits = 0;
  while (digits < v.size() && v[digits] >= '0' && v[digits] <= '9') ++digits;
  if (digits == 0 || digits > 6) return false;
  std::string_view unit = v.substr(digits);
  return unit == "kbit" || unit == "mbit" || unit == "gbit";
}

bool valid_env_name(std::string_view name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  for (char c : name) {
    bool ok =
        (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}

std::string parse_env(std::string_view text, Options& o) {
  auto eq = text.find('=');
  if (eq == std::string_view::npos) return "-x wants NAME=VALUE, got '" + std::string(text) + "'";
  std::string_view name = text.substr(0, eq);
  if (!valid_env_name(name)) return "-x: bad variable name '" + std::string(name) + "'";
  for (std::string_view reserved : kReservedNames)
    if (name == reserved) return "-x: " + std::string(name) + " is set by loomrun itself";
  o.extra_env.emplace_back(name, text.substr(eq + 1));
  return {};
}

bool valid_root(std::string_view root) {
  auto colon = root.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  auto port = parse_int(root.substr(colon + 1));
  return port && *port >= 1 && *port <= 65535;
}

// --timeout and --grace: at most config::kMaxTimeout (30 days), like every timeout of loom.
static_assert(config::kMaxTimeout == std::chrono::hours(720), "the message below says 720h");
std::string parse_duration_option(std::string_view flag, std::string_view text,
                                  std::optional<std::chrono::milliseconds>& out) {
  out = parse_seconds(text);
  if (!out) return std::string(flag) + ": bad duration '" + std::string(text) + "'";
  if (*out > config::kMaxTimeout) {
    out.reset();
    return std::string(flag) + ": '" + std::string(text) + "' is longer than the maximum, 720h";
  }
  return {};
}

// Applies one option; returns an error message, or "" when it was fine.
std::string apply(Opt id, std::string_view value, Options& o) {
  switch (id) {
    case Opt::Ranks: {
      auto n = parse_int(value);
      if (!n || *n < 1 || *n > kMaxRanks)
        return "-n wants a number of ranks from 1 to " + std::to_string(kMaxRanks) + ", got '" +
               std::string(value) + "'";
      o.nranks = *n;
      return {};
    }
    case Opt::Env: return parse_env(value, o);
    case Opt::Root:
      if (!valid_root(value)) return "--root wants HOST:PORT, got '" + std::string(value) + "'";
      o.root = value;
      return {};
    case Opt::NoPrefix: o.prefix = false; return {};
    case Opt::OnlyRank:
      o.only_rank = parse_int(value);
      if (!o.only_rank || *o.only_rank < 0)
        return "--only-rank wants a rank, got '" + std::string(value) + "'";
      return {};
    case Opt::Timeout: return parse_duration_option("--timeout", value, o.timeout);
    case Opt::Grace: {
      std::optional<std::chrono::milliseconds> grace;
      std::string error = parse_duration_option("--grace", value, grace);
      if (grace) o.grace = *grace;
      return error;
    }
    case Opt::Hosts: {
      auto h = parse_int(value);
      if (!h || *h < 1 || *h > 64)
        return "--hosts wants a number of hosts from 1 to 64, got '" + std::string(value) + "'";
      o.hosts = *h;
      return {};
    }
    case Opt::Nics: {
      auto k = parse_int(value);
      if (!k || *k < 1 || *k > 8)
        return "--nics wants a number of interfaces per host from 1 to 8, got '" +
               std::string(value) + "'";
      o.nics = *k;
      return {};
    }
    case Opt::NicRate:
      if (!valid_rate(value))
        return "--nic-rate wants a rate such as 500mbit or 1gbit, got '" + std::string(value) + "'";
      o.nic_rate = value;
      return {};
    case Opt::CpuBind:
      if (value == "block")
        o.cpu_bind = CpuBind::Block;
      else if (value == "none")
        o.cpu_bind = CpuBind::None;
      else
        return "--cpu-bind wants block or none, got '" + std::string(value) + "'";
      return {};
    case Opt::Help: return {};
  }
  return {};
}

std::string check_complete(const Options& o) {
  if (o.nranks == 0) return "missing -n N (the number of ranks)";
  if (o.command.empty()) return "missing the program to run";
  if (o.hosts > o.nranks)
    return "--hosts " + std::to_string(o.hosts) + " needs at least as many ranks (-n " +
           std::to_string(o.nranks) + ")";
  if (o.hosts > 0 && !o.root.empty()) return "--root cannot be combined with --hosts";
  if (o.hosts == 0 && (o.nics > 1 || !o.nic_rate.empty()))
    return "--nics and --nic-rate shape the namespaces of --hosts: give --hosts too";
  if (o.only_rank && *o.only_rank >= o.nranks)
    return "--only-rank " + std::to_string(*o.only_rank) + " is not a rank of a job of " +
           std::to_string(o.nranks);
  if (o.timeout && o.timeout->count() == 0) return "--timeout must be more than 0";
  return {};
}

ParseResult error_result(std::string message) {
  ParseResult r;
  r.kind = ParseResult::Kind::Error;
  r.error = std::move(message);
  return r;
}

}  // namespace

std::optional<std::chrono::milliseconds> parse_seconds(std::string_view text) {
  std::string s(text);
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || !std::isfinite(v) || v < 0) return std::nullopt;
  std::string_view unit(end);
  double ms_per = 0;
  if (unit.empty() || unit == "s")
    ms_per = 1000;
  else if (unit == "ms")
    ms_per = 1;
  else if (unit == "m" || unit == "min")
    ms_per = 60'000;
  else if (unit == "h")
    ms_per = 3'600'000;
  else
    return std::nullopt;
  double ms = std::ceil(v * ms_per);
  if (ms > 1e15) return std::nullopt;  // ~30,000 years: reject rather than overflow
  return std::chrono::milliseconds(static_cast<std::int64_t>(ms));
}

ParseResult parse_args(std::span<const std::string> args) {
  ParseResult r;
  std::size_t i = 0;
  for (; i < args.size(); ++i) {
    std::string_view arg = args[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') break;  // the program
    SplitArg split = split_arg(arg);
    const OptDef* def = find_option(split.name);
    if (!def) return error_result("unknown option '" + std::string(arg) + "'");
    if (def->id == Opt::Help) {
      r.kind = ParseResult::Kind::Help;
      return r;
    }
    if (!def->takes_value && split.value)
      return error_result(std::string(def->name) + " takes no value");
    std::string_view value;
    if (def->takes_value && split.value) {
      value = *split.value;
    } else if (def->takes_value) {
      if (i + 1 >= args.size()) return error_result(std::string(def->name) + " wants a value");
      value = args[++i];
    }
    if (std::string error = apply(def->id, value, r.options); !error.empty())
      return error_result(error);
  }
  r.options.command.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  if (std::string error = check_complete(r.options); !error.empty()) return error_result(error);
  r.kind = ParseResult::Kind::Run;
  return r;
}

int host_of(const Options& options, int rank) {
  if (options.hosts <= 0) return 0;
  return static_cast<int>(static_cast<long>(rank) * options.hosts / options.nranks);
}

std::pair<int, int> local_rank_of(const Options& options, int rank) {
  if (options.hosts <= 0) return {rank, options.nranks};
  int host = host_of(options, rank);
  int first = rank, size = 0;
  while (first > 0 && host_of(options, first - 1) == host) --first;
  for (int r = first; r < options.nranks && host_of(options, r) == host; ++r) ++size;
  return {rank - first, size};
}

}  // namespace loom::run
