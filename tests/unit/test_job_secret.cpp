// Tests of the secret a job launched from its environment authenticates with.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "config/config.hpp"
#include "launch/job_secret.hpp"

namespace {

namespace fs = std::filesystem;
using loom::ErrorCode;

loom::config::Config cfg_with(std::map<std::string, std::string> o) {
  auto c = loom::config::Config::load(o);
  REQUIRE(c.is_ok());
  return std::move(c).value();
}

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("loom-secret-test-" + std::to_string(::getpid()));
  TempDir() { fs::remove_all(path); }
  ~TempDir() { fs::remove_all(path); }
};

}  // namespace

TEST_CASE("launch: LOOM_SECRET must be 32 to 64 hex digits", "[launch]") {
  for (const char* bad : {"a", "00", "0123456789abcdef", "0123456789abcdef0123456789abcde",
                          "0123456789abcdef0123456789abcdeg"}) {
    CAPTURE(bad);
    auto s = loom::launch::job_secret(cfg_with({{"LOOM_SECRET", bad}}), "torchrun");
    REQUIRE_FALSE(s.is_ok());
    CHECK(s.status().code() == ErrorCode::InvalidUsage);
    CHECK_THAT(s.status().message(), Catch::Contains("LOOM_SECRET must be 32 to 64 hex digits"));
  }
  const std::string ok = "00112233445566778899aabbccddeeff";
  CHECK(loom::launch::job_secret(cfg_with({{"LOOM_SECRET", ok}}), "slurm").value() == ok);
  auto longer = loom::launch::job_secret(cfg_with({{"LOOM_SECRET", ok + ok}}), "slurm");
  REQUIRE(longer.is_ok());
  CHECK(longer.value().size() == 32);
  CHECK(longer.value() != ok);
}

TEST_CASE("launch: the secret file is created 0600 once and shared, per job", "[launch]") {
  TempDir dir;
  const std::string file = (dir.path / "sub" / "secret").string();
  auto first = loom::launch::job_secret(cfg_with({{"LOOM_SECRET_FILE", file}}), "loom");
  REQUIRE(first.is_ok());
  CHECK(first.value().size() == 32);
  struct stat st {};
  REQUIRE(::stat(file.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  // Every later rank reads the same secret.
  CHECK(loom::launch::job_secret(cfg_with({{"LOOM_SECRET_FILE", file}}), "loom").value() ==
        first.value());
  // Two Slurm steps (or torchrun runs) of the same user get different secrets from one file.
  auto step = [&](const char* job, const char* s) {
    return loom::launch::job_secret(
               cfg_with({{"LOOM_SECRET_FILE", file}, {"SLURM_JOB_ID", job}, {"SLURM_STEP_ID", s}}),
               "slurm")
        .value();
  };
  CHECK(step("10", "0") == step("10", "0"));
  CHECK(step("10", "0") != step("10", "1"));
  CHECK(step("10", "0") != first.value());
}

TEST_CASE("launch: a secret file others may read, or a link, is refused", "[launch]") {
  TempDir dir;
  fs::create_directories(dir.path);
  const std::string file = (dir.path / "secret").string();
  { std::ofstream(file) << "00112233445566778899aabbccddeeff\n"; }
  ::chmod(file.c_str(), 0644);
  auto open = loom::launch::job_secret(cfg_with({{"LOOM_SECRET_FILE", file}}), "loom");
  REQUIRE_FALSE(open.is_ok());
  CHECK_THAT(open.status().message(), Catch::Contains("may be read by others (mode 0644"));
  ::chmod(file.c_str(), 0600);
  CHECK(loom::launch::job_secret(cfg_with({{"LOOM_SECRET_FILE", file}}), "loom").value() ==
        "00112233445566778899aabbccddeeff");
  const std::string link = (dir.path / "link").string();
  fs::create_symlink(file, link);
  auto linked = loom::launch::job_secret(cfg_with({{"LOOM_SECRET_FILE", link}}), "loom");
  REQUIRE_FALSE(linked.is_ok());
  CHECK_THAT(linked.status().message(), Catch::Contains("symbolic link"));
  { std::ofstream(file) << "short\n"; }
  auto garbage = loom::launch::job_secret(cfg_with({{"LOOM_SECRET_FILE", file}}), "loom");
  REQUIRE_FALSE(garbage.is_ok());
  CHECK_THAT(garbage.status().message(), Catch::Contains("does not hold 32 hex digits"));
}

TEST_CASE("launch: LOOM_SECRET_FILE=none runs unauthenticated", "[launch]") {
  auto none = loom::launch::job_secret(cfg_with({{"LOOM_SECRET_FILE", "none"}}), "torchrun");
  REQUIRE(none.is_ok());
  CHECK(none.value().empty());
}
