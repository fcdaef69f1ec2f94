// The settings registry, its parsers, and launch-environment detection.
#include <catch2/catch.hpp>
#include <limits>
#include <set>

#include "config/config.hpp"
#include "launch/launch_env.hpp"

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
Result<launch::LaunchInfo> detect(const std::map<std::string, std::string>& env) {
  auto cfg = config::Config::load(env);
  if (!cfg.is_ok()) return cfg.status();
  return launch::detect_launch(*cfg);
}
}  // namespace

TEST_CASE("config: loom launch variables", "[config][launch]") {
  auto li = detect({{"LOOM_RANK", "2"}, {"LOOM_WORLD_SIZE", "4"}, {"LOOM_ROOT", "10.1.2.3:29500"}});
  REQUIRE(li.is_ok());
  CHECK(li->rank == 2);
  CHECK(li->world_size == 4);
  CHECK(li->root == "10.1.2.3:29500");
  CHECK(li->source == "loom");
  auto missing = detect({{"LOOM_RANK", "2"}});
  REQUIRE_FALSE(missing.is_ok());
  CHECK_THAT(missing.status().message(),
             Contains("LOOM_WORLD_SIZE") && Contains("LOOM_ROOT") && Contains("found: LOOM_RANK"));
  auto range = detect({{"LOOM_RANK", "4"}, {"LOOM_WORLD_SIZE", "4"}, {"LOOM_ROOT", "h:1"}});
  REQUIRE_FALSE(range.is_ok());
  CHECK_THAT(range.status().message(), Contains("rank 4 is outside [0, 4)"));
}

TEST_CASE("config: torchrun launch variables", "[config][launch]") {
  auto li = detect(
      {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "node7"}, {"MASTER_PORT", "29500"}});
  REQUIRE(li.is_ok());
  CHECK(li->source == "torchrun");
  CHECK(li->root == "node7:29500");
  auto v6 =
      detect({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "::1"}, {"MASTER_PORT", "5"}});
  REQUIRE(v6.is_ok());
  CHECK(v6->root == "[::1]:5");
  auto missing = detect({{"RANK", "1"}, {"WORLD_SIZE", "2"}});
  REQUIRE_FALSE(missing.is_ok());
  CHECK_THAT(missing.status().message(), Contains("MASTER_ADDR") && Contains("MASTER_PORT"));
}

TEST_CASE("config: contradictory or absent launch variables", "[config][launch]") {
  auto both =
      detect({{"LOOM_RANK", "1"}, {"RANK", "2"}, {"LOOM_WORLD_SIZE", "4"}, {"LOOM_ROOT", "h:1"}});
  REQUIRE_FALSE(both.is_ok());
  CHECK_THAT(both.status().message(), Contains("LOOM_RANK=1") && Contains("RANK=2"));
  auto none = detect({});
  REQUIRE_FALSE(none.is_ok());
  CHECK_THAT(none.status().message(), Contains("LOOM_RANK (or RANK"));
}

namespace {
// The message of Config::load's refusal of NAME=VALUE ("" when it accepts the value).
std::string refusal(const std::string& name, const std::string& value) {
  auto cfg = config::Config::load({{name, value}});
  if (cfg.is_ok()) return "";
  CHECK(cfg.status().code() == ErrorCode::InvalidUsage);
  return cfg.status().message();
}
}  // namespace

TEST_CASE("config: out-of-range numbers are refused naming the setting, value and range",
          "[config]") {
  struct Case {
    const char* name;
    const char* value;
    const char* allowed;
  };
  for (const Case& c : {
           // Launch numbers: refused, never wrapped into an int.
           Case{"LOOM_WORLD_SIZE", "99999999999", "1 to 1048576"},
           Case{"LOOM_WORLD_SIZE", "2147483648", "1 to 1048576"},
           Case{"LOOM_WORLD_SIZE", "1048577", "1 to 1048576"},
           Case{"LOOM_WORLD_SIZE", "0", "1 to 1048576"},
           Case{"LOOM_RANK", "4294967297", "0 to 1048575"},
           Case{"LOOM_RANK", "-1", "0 to 1048575"},
           Case{"LOOM_LOCAL_RANK", "4294967296", "0 to 1048575"},
           Case{"RANK", "4294967297", "0 to 1048575"},
           Case{"WORLD_SIZE", "2147483648", "1 to 1048576"},
           Case{"LOCAL_WORLD_SIZE", "-3", "1 to 1048576"},
           Case{"SLURM_PROCID", "4294967297", "0 to 1048575"},
           Case{"SLURM_NTASKS", "99999999999", "1 to 1048576"},
           Case{"OMPI_COMM_WORLD_RANK", "4294967296", "0 to 1048575"},
           Case{"OMPI_COMM_WORLD_SIZE", "2147483648", "1 to 1048576"},
           Case{"MASTER_PORT", "65536", "1 to 65535"},
           Case{"LOOM_PORT", "0", "1 to 65535"},
           // Numbers beyond 64 bits: the same message, with the range.
           Case{"LOOM_RANK", "99999999999999999999", "0 to 1048575"},
           // Durations that would overflow a time point, or mean nothing.
           Case{"LOOM_TIMEOUT", "100000000h", "1ms to 720h"},
           Case{"LOOM_TIMEOUT", "721h", "1ms to 720h"},
           Case{"LOOM_TIMEOUT", "0", "1ms to 720h"},
           Case{"LOOM_TIMEOUT", "0ms", "1ms to 720h"},
           // Threads, waits and sizes.
           Case{"LOOM_TCP_THREADS", "9", "-1 to 8"},
           Case{"LOOM_TCP_THREADS", "-2", "-1 to 8"},
           Case{"LOOM_SOCKETS_PER_PEER", "17", "0 to 16"},
           Case{"LOOM_OFI_PROGRESS_THREAD", "2", "-1 to 1"},
           Case{"LOOM_SPIN_US", "-5", "-1 to 1000000"},
           Case{"LOOM_SPIN_US", "99999999999", "-1 to 1000000"},
           Case{"LOOM_YIELD_US", "-2", "-1 to 1000000"},
           Case{"LOOM_YIELD_US", "1000001", "-1 to 1000000"},
           Case{"LOOM_PIPELINE_DEPTH", "0", "1 to 64"},
           Case{"LOOM_SHM_SLOT_SIZE", "1G", "64 to 16M"},
           Case{"LOOM_SHM_SLOT_SIZE", "32", "64 to 16M"},
           Case{"LOOM_SHM_SLOTS", "4097", "1 to 4096"},
           Case{"LOOM_CUDA_IPC_SLOT_SIZE", "512M", "4K to 256M"},
           Case{"LOOM_CUDA_IPC_SLOT_SIZE", "1K", "4K to 256M"},
           Case{"LOOM_SOCKET_BUFFER", "2G", "0 to 1G"},
           Case{"LOOM_SOCKET_STRIPE_MIN", "1T", "0 to 1G"},
       }) {
    INFO(c.name << "=" << c.value);
    const std::string m = refusal(c.name, c.value);
    CHECK_THAT(m, Contains(c.name) && Contains(std::string("'") + c.value + "'") &&
                      Contains(std::string("allowed: ") + c.allowed));
  }
  CHECK_THAT(refusal("LOOM_TIMEOUT", "0"), Contains("0 does not mean \"no deadline\""));
}

TEST_CASE("config: the ends of every range are accepted", "[config]") {
  for (auto [name, value] : std::initializer_list<std::pair<const char*, const char*>>{
           {"LOOM_WORLD_SIZE", "1"},
           {"LOOM_WORLD_SIZE", "1048576"},
           {"LOOM_RANK", "0"},
           {"LOOM_RANK", "1048575"},
           {"MASTER_PORT", "65535"},
           {"LOOM_TIMEOUT", "1ms"},
           {"LOOM_TIMEOUT", "720h"},
           {"LOOM_TCP_THREADS", "-1"},
           {"LOOM_TCP_THREADS", "8"},
           {"LOOM_SPIN_US", "-1"},
           {"LOOM_SPIN_US", "1000000"},
           {"LOOM_SHM_SLOT_SIZE", "64"},
           {"LOOM_SHM_SLOT_SIZE", "16M"},
           {"LOOM_CUDA_IPC_SLOT_SIZE", "4K"},
           {"LOOM_CUDA_IPC_SLOT_SIZE", "256M"},
           {"LOOM_SOCKET_BUFFER", "0"},
           {"LOOM_DEBUG", "info"},
           {"LOOM_DEBUG", "TRACE"},
           {"LOOM_DEBUG_SUBSYS", "init,^NET"},
           {"LOOM_DEBUG_SUBSYS", "^SHM"},
           {"LOOM_SHM_SLOT_ORDER", "reuse"},
           {"LOOM_DEVICE", "host-sim"},
       }) {
    INFO(name << "=" << value);
    CHECK(refusal(name, value).empty());
  }
}

TEST_CASE("config: a name a choice setting does not know is refused, listing the names",
          "[config]") {
  CHECK_THAT(refusal("LOOM_DEBUG", "VERBOSE"),
             Contains("LOOM_DEBUG='VERBOSE'") &&
                 Contains("one of OFF, NONE, ERROR, WARN, INFO, DEBUG, TRACE"));
  CHECK_THAT(refusal("LOOM_DEBUG", " INFO"), Contains("LOOM_DEBUG"));
  CHECK_THAT(refusal("LOOM_DEBUG_SUBSYS", "INIT,INTI"),
             Contains("LOOM_DEBUG_SUBSYS") && Contains("'INTI'") && Contains("BOOTSTRAP"));
  CHECK_THAT(refusal("LOOM_DEVICE", "gpu"),
             Contains("LOOM_DEVICE='gpu'") && Contains("auto, cuda, host-sim, none"));
  // The shm and ofi parsers take these names as written; so does the registry.
  CHECK_THAT(refusal("LOOM_SHM_SLOT_ORDER", "REUSE"), Contains("auto, reuse, rotate"));
  CHECK_THAT(refusal("LOOM_SHM_SINGLE_COPY", "maybe"), Contains("auto, on, off"));
  CHECK_THAT(refusal("LOOM_OFI_HMEM", "gdr"), Contains("auto, off, simulate"));
}

TEST_CASE("config: every number setting declares a range, and loom-info can print it", "[config]") {
  for (const config::Spec& s : config::all_settings()) {
    INFO(s.name);
    const bool number = s.type == config::Type::Int || s.type == config::Type::Size ||
                        s.type == config::Type::Duration;
    if (number) {
      CHECK(s.range.min < s.range.max);  // not the empty Range{} of a setting declared without
      CHECK_FALSE(config::allowed_text(s).empty());
    } else {
      CHECK(s.range.min == 0);
      CHECK(s.range.max == 0);
    }
    if (!s.choices.names.empty()) CHECK(s.type == config::Type::String);
    if (!s.default_value.empty())
      CHECK(refusal(std::string(s.name), std::string(s.default_value)).empty());
  }
  auto allowed = [](std::string_view name) {
    return config::allowed_text(*config::find_spec(name));
  };
  CHECK(allowed("LOOM_TIMEOUT") == "1ms to 720h");
  CHECK(allowed("LOOM_SHM_SLOT_SIZE") == "64 to 16M");
  CHECK(allowed("LOOM_WORLD_SIZE") == "1 to 1048576");
  CHECK(allowed("LOOM_SHM_SLOT_ORDER") == "one of auto, reuse, rotate");
  CHECK(allowed("LOOM_DETERMINISTIC").empty());
  CHECK(allowed("LOOM_ROOT").empty());
  CHECK(config::kMaxRanks <= std::numeric_limits<int>::max());
}
