// The settings registry, its parsers, and launch-environment detection.
#include <catch2/catch.hpp>
#include <set>

#include "config/config.hpp"
#include "core/launch_env.hpp"

using namespace loom;
using Catch::Matchers::Contains;

TEST_CASE("config: parsers accept documented forms and reject others", "[config]") {
  CHECK(config::parse_size("4096").value() == 4096);
  CHECK(config::parse_size("64K").value() == 64 * 1024);
  CHECK(config::parse_size("1M").value() == 1 << 20);
  CHECK(config::parse_size("2g").value() == 2ull << 30);
  CHECK(config::parse_size("16MiB").value() == 16 << 20);
  CHECK_FALSE(config::parse_size("12Q").is_ok());
  CHECK_FALSE(config::parse_size("").is_ok());
  CHECK_FALSE(config::parse_size("99999999999999999999").is_ok());
  CHECK(config::parse_duration("250ms").value().count() == 250);
  CHECK(config::parse_duration("30s").value().count() == 30000);
  CHECK(config::parse_duration("30").value().count() == 30000);
  CHECK(config::parse_duration("5m").value().count() == 300000);
  CHECK_FALSE(config::parse_duration("soon").is_ok());
  CHECK(config::parse_bool("yes").value());
  CHECK_FALSE(config::parse_bool("off").value());
  CHECK_FALSE(config::parse_bool("maybe").is_ok());
  CHECK(config::parse_int("-12").value() == -12);
  CHECK_FALSE(config::parse_int("12x").is_ok());
}

TEST_CASE("config: every setting is declared once with a description", "[config]") {
  std::set<std::string_view> names;
  for (const auto& s : config::all_settings()) {
    CHECK(names.insert(s.name).second);
    CHECK_FALSE(s.description.empty());
    CHECK_FALSE(s.group.empty());
  }
  CHECK(names.count("LOOM_TIMEOUT") == 1);
}

TEST_CASE("config: overrides win and are validated", "[config]") {
  auto cfg = config::Config::load({{"LOOM_TIMEOUT", "45s"}, {"LOOM_SOCKET_BUFFER", "1M"}});
  REQUIRE(cfg.is_ok());
  CHECK(cfg->get_duration("LOOM_TIMEOUT").count() == 45000);
  CHECK(cfg->source("LOOM_TIMEOUT") == config::Source::Override);
  CHECK(cfg->get_size("LOOM_SOCKET_BUFFER") == 1 << 20);
  CHECK(cfg->source("LOOM_SPIN_US") == config::Source::Default);
  auto bad = config::Config::load({{"LOOM_TIMEOUT", "soon"}});
  REQUIRE_FALSE(bad.is_ok());
  CHECK_THAT(bad.status().message(), Contains("LOOM_TIMEOUT") && Contains("soon"));
  auto unknown = config::Config::load({{"LOOM_TIMEOTU", "1"}});
  REQUIRE_FALSE(unknown.is_ok());
  CHECK_THAT(unknown.status().message(), Contains("LOOM_TIMEOTU"));
}

namespace {
Result<core::LaunchInfo> launch(const std::map<std::string, std::string>& env) {
  auto cfg = config::Config::load(env);
  if (!cfg.is_ok()) return cfg.status();
  return core::detect_launch(*cfg);
}
}  // namespace

TEST_CASE("config: loom launch variables", "[config][launch]") {
  auto li = launch({{"LOOM_RANK", "2"}, {"LOOM_WORLD_SIZE", "4"}, {"LOOM_ROOT", "10.1.2.3:29500"}});
  REQUIRE(li.is_ok());
  CHECK(li->rank == 2);
  CHECK(li->world_size == 4);
  CHECK(li->root == "10.1.2.3:29500");
  CHECK(li->source == "loom");
  auto missing = launch({{"LOOM_RANK", "2"}});
  REQUIRE_FALSE(missing.is_ok());
  CHECK_THAT(missing.status().message(),
             Contains("LOOM_WORLD_SIZE") && Contains("LOOM_ROOT") && Contains("found: LOOM_RANK"));
  auto range = launch({{"LOOM_RANK", "4"}, {"LOOM_WORLD_SIZE", "4"}, {"LOOM_ROOT", "h:1"}});
  REQUIRE_FALSE(range.is_ok());
  CHECK_THAT(range.status().message(), Contains("rank 4 is outside [0, 4)"));
}

TEST_CASE("config: torchrun launch variables", "[config][launch]") {
  auto li = launch(
      {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "node7"}, {"MASTER_PORT", "29500"}});
  REQUIRE(li.is_ok());
  CHECK(li->source == "torchrun");
  CHECK(li->root == "node7:29500");
  auto v6 =
      launch({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "::1"}, {"MASTER_PORT", "5"}});
  REQUIRE(v6.is_ok());
  CHECK(v6->root == "[::1]:5");
  auto missing = launch({{"RANK", "1"}, {"WORLD_SIZE", "2"}});
  REQUIRE_FALSE(missing.is_ok());
  CHECK_THAT(missing.status().message(), Contains("MASTER_ADDR") && Contains("MASTER_PORT"));
}

TEST_CASE("config: contradictory or absent launch variables", "[config][launch]") {
  auto both =
      launch({{"LOOM_RANK", "1"}, {"RANK", "2"}, {"LOOM_WORLD_SIZE", "4"}, {"LOOM_ROOT", "h:1"}});
  REQUIRE_FALSE(both.is_ok());
  CHECK_THAT(both.status().message(), Contains("LOOM_RANK=1") && Contains("RANK=2"));
  auto none = launch({});
  REQUIRE_FALSE(none.is_ok());
  CHECK_THAT(none.status().message(), Contains("LOOM_RANK (or RANK"));
}
