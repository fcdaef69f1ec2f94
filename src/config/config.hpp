// The one configuration registry: every setting loom reads is declared once in settings.cpp
// with its type, default and description. This module is the only code that reads the
// environment.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.hpp"

namespace loom::config {

enum class Type { Int, Bool, Size, Duration, String };

/// The values an Int (the number), Size (bytes) or Duration (milliseconds) setting allows, both
/// ends included. Config::load refuses a value outside it.
struct Range {
  std::int64_t min = 0;
  std::int64_t max = 0;
};

/// The names a String setting allows ("" = any text), separated by '|': "auto|on|off".
struct Choices {
  std::string_view names;
  bool any_case = false;  // "info" matches INFO
  bool list = false;      // a comma-separated list of names, each may start with ^ (excluded)
};

struct Spec {
  std::string_view name;
  Type type;
  std::string_view default_value;  // "" means: unset unless given
  std::string_view description;
  std::string_view group;  // "launch", "log", "net", "coll", ...
  Range range{};           // Int, Size, Duration: required
  Choices choices{};       // String: optional
};

/// Every declared setting, in declaration order.
std::span<const Spec> all_settings();
const Spec* find_spec(std::string_view name);
std::string_view type_name(Type t);
/// What a setting allows, for messages and loom-info: "1 to 2147483647", "64 to 16M",
/// "1ms to 720h", "one of OFF, ERROR, WARN", "" for any text or a boolean.
std::string allowed_text(const Spec& spec);

/// The most ranks a job may have (LOOM_WORLD_SIZE and the launchers' equivalents): 2^20. Every
/// rank keeps some state per rank of the job (about 32 bytes while it waits for the others to
/// join: 0.5 GB at 2^24 ranks), so a mistyped world size must not be taken at its word; real
/// jobs stay far below this.
inline constexpr std::int64_t kMaxRanks = std::int64_t{1} << 20;

/// The longest timeout loom accepts anywhere (LOOM_TIMEOUT, CommOptions::timeout,
/// CollOptions::timeout): 30 days. Every wait has a deadline, so there is no "forever", and a
/// longer one could overflow the clock's time points.
inline constexpr std::chrono::milliseconds kMaxTimeout{30LL * 24 * 3600 * 1000};
/// InvalidArgument unless 1 ms <= `timeout` <= kMaxTimeout; `what` names the option
/// ("CommOptions::timeout"). 0 is refused: it is neither "no deadline" nor "fail at once".
Status check_timeout(std::string_view what, std::chrono::milliseconds timeout);

enum class Source { Default, Environment, Override };
std::string_view source_name(Source s);

/// A snapshot of every setting's value: per-communicator overrides, else the environment, else
/// the default. Values are validated when the snapshot is taken.
class Config {
 public:
  /// Reads the environment now. `overrides` (by name) win over it; an override for an
  /// undeclared name is an error.
  static Result<Config> load(const std::map<std::string, std::string>& overrides = {});

  [[nodiscard]] std::int64_t get_int(std::string_view name) const;
  [[nodiscard]] bool get_bool(std::string_view name) const;
  [[nodiscard]] std::uint64_t get_size(std::string_view name) const;
  [[nodiscard]] std::chrono::milliseconds get_duration(std::string_view name) const;
  [[nodiscard]] std::string get_string(std::string_view name) const;
  /// True when the setting has a value (from any source, default included).
  [[nodiscard]] bool has(std::string_view name) const;
  [[nodiscard]] Source source(std::string_view name) const;
  /// The raw text of the value ("" when unset).
  [[nodiscard]] std::string raw(std::string_view name) const;
  /// LOOM_* variables in the environment that no setting declares (likely typos).
  [[nodiscard]] const std::vector<std::string>& unknown_variables() const { return unknown_; }

 private:
  struct Value {
    std::string raw;
    Source source = Source::Default;
    bool set = false;
  };
  const Value& value_of(std::string_view name, Type expected) const;

  std::map<std::string, Value, std::less<>> values_;
  std::vector<std::string> unknown_;
};

// Parsers, exposed for tests and for command-line tools that take the same formats.
Result<std::int64_t> parse_int(std::string_view text);
Result<bool> parse_bool(std::string_view text);
/// "4096", "64K", "1M", "2G" (binary multiples), "1MiB", "16MB" (also binary).
Result<std::uint64_t> parse_size(std::string_view text);
/// "250ms", "30s", "5m", "1h"; a bare number is seconds.
Result<std::chrono::milliseconds> parse_duration(std::string_view text);

}  // namespace loom::config
