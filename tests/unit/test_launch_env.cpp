// Slurm hostlists and the Slurm / Open MPI launch environments, with fake environments.
#include <catch2/catch.hpp>

#include "config/config.hpp"
#include "launch/hostlist.hpp"
#include "launch/launch_env.hpp"

using namespace loom;
using Catch::Matchers::Contains;
using Hosts = std::vector<std::string>;

namespace {
Hosts expand(const std::string& text) {
  auto r = launch::expand_hostlist(text);
  REQUIRE(r.is_ok());
  return *r;
}

Result<launch::LaunchInfo> detect(const std::map<std::string, std::string>& env) {
  auto cfg = config::Config::load(env);
  if (!cfg.is_ok()) return cfg.status();
  return launch::detect_launch(*cfg);
}

std::map<std::string, std::string> slurm_env(int rank) {
  return {{"SLURM_PROCID", std::to_string(rank)},
          {"SLURM_NTASKS", "8"},
          {"SLURM_LOCALID", std::to_string(rank % 4)},
          {"SLURM_STEP_NODELIST", "gpu[07-08]"},
          {"SLURM_JOB_NODELIST", "gpu[05-08]"},
          {"SLURM_JOB_ID", "4711"},
          {"SLURM_STEP_ID", "2"}};
}
}  // namespace

TEST_CASE("hostlist: plain names, ranges, padding, prefixes and suffixes", "[hostlist]") {
  CHECK(expand("login1") == Hosts{"login1"});
  CHECK(expand("a,b,c") == Hosts{"a", "b", "c"});
  CHECK(expand("node[01-04,07]") == Hosts{"node01", "node02", "node03", "node04", "node07"});
  CHECK(expand("n[8-11]") == Hosts{"n8", "n9", "n10", "n11"});
  CHECK(expand("n[098-101]") == Hosts{"n098", "n099", "n100", "n101"});
  CHECK(expand("gpu[1-2]-ib") == Hosts{"gpu1-ib", "gpu2-ib"});
  CHECK(expand("node[01-02],login1,gpu[3,5]-ib") ==
        Hosts{"node01", "node02", "login1", "gpu3-ib", "gpu5-ib"});
  CHECK(expand("r[1-2]n[01-02]") == Hosts{"r1n01", "r1n02", "r2n01", "r2n02"});
  CHECK(expand("x[5]") == Hosts{"x5"});
  CHECK(expand("[1-3]") == Hosts{"1", "2", "3"});
  CHECK(expand("h[0-9999]").size() == 10000);
  CHECK(launch::first_host("node[03-04,07],login").value() == "node03");
}

TEST_CASE("hostlist: malformed lists are errors naming the text", "[hostlist]") {
  for (const char* bad : {"node[01-04", "node01]", "node[]", "node[4-1]", "node[a-b]", "node[1-2",
                          "a,,b", ",a", "node[[1]]", "node[1-]", "node[-2]", ""}) {
    INFO(bad);
    auto r = launch::expand_hostlist(bad);
    REQUIRE_FALSE(r.is_ok());
    CHECK(r.status().code() == ErrorCode::InvalidArgument);
    CHECK_THAT(r.status().message(), Contains("malformed hostlist"));
  }
  auto big = launch::expand_hostlist("a[0-999],b[0-999]", 1500);
  REQUIRE_FALSE(big.is_ok());
  CHECK_THAT(big.status().message(), Contains("too many hosts"));
  auto product = launch::expand_hostlist("a[0-99]b[0-99]", 5000);
  REQUIRE_FALSE(product.is_ok());
}

TEST_CASE("launch: Slurm srun", "[launch]") {
  auto li = detect(slurm_env(5));
  REQUIRE(li.is_ok());
  CHECK(li->source == "slurm");
  CHECK(li->rank == 5);
  CHECK(li->world_size == 8);
  CHECK(li->local_rank == 1);
  // The step's first node, not the allocation's; port from job and step ids, same on all ranks.
  CHECK(li->root.rfind("gpu07:", 0) == 0);
  CHECK(li->root == "gpu07:" + std::to_string(20000 + (4711 * 37 + 2) % 10000));
  CHECK(detect(slurm_env(0))->root == li->root);
  CHECK_THAT(li->detail, Contains("SLURM_STEP_NODELIST"));

  auto other_step = slurm_env(0);
  other_step["SLURM_STEP_ID"] = "3";
  CHECK(detect(other_step)->root != li->root);

  auto job_only = slurm_env(0);
  job_only.erase("SLURM_STEP_NODELIST");
  job_only["LOOM_PORT"] = "31000";
  CHECK(detect(job_only)->root == "gpu05:31000");

  auto root = slurm_env(0);
  root["LOOM_ROOT"] = "10.0.0.1:999";
  CHECK(detect(root)->root == "10.0.0.1:999");

  auto bad_port = slurm_env(0);
  bad_port["LOOM_PORT"] = "70000";
  CHECK_THAT(detect(bad_port).status().message(),
             Contains("LOOM_PORT='70000'") && Contains("allowed: 1 to 65535"));

  auto bad_list = slurm_env(0);
  bad_list["SLURM_STEP_NODELIST"] = "gpu[07-";
  CHECK_THAT(detect(bad_list).status().message(),
             Contains("SLURM_STEP_NODELIST") && Contains("gpu[07-"));
}

TEST_CASE("launch: incomplete Slurm environment lists found and missing", "[launch]") {
  auto li = detect({{"SLURM_PROCID", "0"}, {"SLURM_JOB_ID", "9"}});
  REQUIRE_FALSE(li.is_ok());
  CHECK(li.status().code() == ErrorCode::InvalidUsage);
  const std::string m = li.status().message();
  CHECK_THAT(m, Contains("Slurm") && Contains("SLURM_NTASKS") && Contains("SLURM_STEP_NODELIST"));
  CHECK_THAT(m, Contains("found: SLURM_PROCID, SLURM_JOB_ID") && Contains("SLURM_STEP_ID"));
  // The batch script itself (sbatch -n 4): SLURM_PROCID=0 but no step.
  auto batch = detect({{"SLURM_PROCID", "0"},
                       {"SLURM_NTASKS", "4"},
                       {"SLURM_JOB_ID", "12"},
                       {"SLURM_JOB_NODELIST", "n[1-2]"}});
  REQUIRE_FALSE(batch.is_ok());
  CHECK_THAT(batch.status().message(),
             Contains("missing SLURM_STEP_ID") && Contains("start the ranks with srun"));
  auto no_port = detect({{"SLURM_PROCID", "0"},
                         {"SLURM_NTASKS", "2"},
                         {"SLURM_STEP_ID", "0"},
                         {"SLURM_JOB_NODELIST", "n1"}});
  REQUIRE_FALSE(no_port.is_ok());
  CHECK_THAT(no_port.status().message(), Contains("missing SLURM_JOB_ID (or LOOM_PORT)") &&
                                             Contains("SLURM_JOB_NODELIST") &&
                                             !Contains("missing SLURM_STEP_ID"));
}

TEST_CASE("launch: Open MPI mpirun", "[launch]") {
  std::map<std::string, std::string> env{{"OMPI_COMM_WORLD_RANK", "3"},
                                         {"OMPI_COMM_WORLD_SIZE", "4"},
                                         {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                         {"LOOM_ROOT", "head:29400"}};
  auto li = detect(env);
  REQUIRE(li.is_ok());
  CHECK(li->source == "mpirun");
  CHECK(li->rank == 3);
  CHECK(li->world_size == 4);
  CHECK(li->local_rank == 1);
  CHECK(li->root == "head:29400");

  env.erase("LOOM_ROOT");
  auto missing = detect(env);
  REQUIRE_FALSE(missing.is_ok());
  CHECK_THAT(missing.status().message(),
             Contains("mpirun") && Contains("LOOM_ROOT") && Contains("OMPI_COMM_WORLD_RANK"));
  auto no_size = detect({{"OMPI_COMM_WORLD_RANK", "0"}, {"LOOM_ROOT", "h:1"}});
  CHECK_THAT(no_size.status().message(),
             Contains("missing OMPI_COMM_WORLD_SIZE") && Contains("LOOM_ROOT"));
  auto range =
      detect({{"OMPI_COMM_WORLD_RANK", "4"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"LOOM_ROOT", "h:1"}});
  CHECK_THAT(range.status().message(), Contains("rank 4 is outside [0, 4)"));
}

TEST_CASE("launch: mpirun inside a Slurm allocation, OMPI wins where they disagree", "[launch]") {
  // sbatch -n 4 then mpirun -np 4: every process inherits SLURM_PROCID=0 of the batch step.
  std::map<std::string, std::string> env{{"SLURM_PROCID", "0"},
                                         {"SLURM_NTASKS", "4"},
                                         {"SLURM_JOB_NODELIST", "cn[12-13]"},
                                         {"SLURM_JOB_ID", "77"},
                                         {"OMPI_COMM_WORLD_SIZE", "4"}};
  std::string root0;
  for (int r = 0; r < 4; ++r) {
    env["OMPI_COMM_WORLD_RANK"] = std::to_string(r);
    auto li = detect(env);
    REQUIRE(li.is_ok());
    CHECK(li->source == "mpirun");
    CHECK(li->rank == r);
    CHECK(li->world_size == 4);
    CHECK(li->root.rfind("cn12:", 0) == 0);  // same root on every rank
    if (r == 0) root0 = li->root;
    CHECK(li->root == root0);
    if (r > 0) CHECK_THAT(li->detail, Contains("win over") && Contains("SLURM_PROCID=0"));
  }
  env["LOOM_ROOT"] = "cn13:5000";
  CHECK(detect(env)->root == "cn13:5000");
}

TEST_CASE("launch: precedence loom > torchrun > slurm > mpirun", "[launch]") {
  auto env = slurm_env(1);
  env.insert({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "8"}});
  env.insert({{"RANK", "2"}, {"WORLD_SIZE", "3"}, {"MASTER_ADDR", "m"}, {"MASTER_PORT", "5"}});
  env.insert({{"LOOM_RANK", "2"}, {"LOOM_WORLD_SIZE", "3"}, {"LOOM_ROOT", "l:1"}});
  CHECK(detect(env)->source == "loom");
  env.erase("LOOM_RANK");
  env.erase("LOOM_WORLD_SIZE");
  env.erase("LOOM_ROOT");
  CHECK(detect(env)->source == "torchrun");
  env.erase("RANK");
  CHECK(detect(env)->source == "mpirun");  // srun never sets OMPI_*: mpirun is innermost
  env.erase("OMPI_COMM_WORLD_RANK");
  CHECK(detect(env)->source == "slurm");
  auto none = detect({{"SLURM_NTASKS", "2"}});
  REQUIRE_FALSE(none.is_ok());
  CHECK_THAT(none.status().message(), Contains("SLURM_PROCID") && Contains("found: SLURM_NTASKS"));
}

TEST_CASE("launch: numbers beyond a rank's range are refused naming the variable, not wrapped",
          "[launch]") {
  const std::map<std::string, std::string> loom_env{
      {"LOOM_RANK", "0"}, {"LOOM_WORLD_SIZE", "4"}, {"LOOM_ROOT", "h:1"}};
  const std::map<std::string, std::string> torch_env{
      {"RANK", "0"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "29500"}};
  const std::map<std::string, std::string> mpi_env{
      {"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"LOOM_ROOT", "h:1"}};
  struct Case {
    std::map<std::string, std::string> env;
    const char* name;
    const char* value;
  };
  for (Case c : {
           // Once 1215752191 ranks (and ~9 GB allocated before the timeout), rank 1, and -2^31.
           Case{loom_env, "LOOM_WORLD_SIZE", "99999999999"},
           Case{loom_env, "LOOM_RANK", "4294967297"},
           Case{loom_env, "LOOM_WORLD_SIZE", "2147483648"},
           Case{torch_env, "RANK", "4294967297"},
           Case{torch_env, "WORLD_SIZE", "2147483648"},
           Case{torch_env, "MASTER_PORT", "4294996796"},
           Case{slurm_env(0), "SLURM_PROCID", "4294967297"},
           Case{slurm_env(0), "SLURM_NTASKS", "99999999999"},
           Case{mpi_env, "OMPI_COMM_WORLD_RANK", "4294967296"},
           Case{mpi_env, "OMPI_COMM_WORLD_SIZE", "2147483648"},
       }) {
    INFO(c.name << "=" << c.value);
    c.env[c.name] = c.value;
    auto li = detect(c.env);
    REQUIRE_FALSE(li.is_ok());
    CHECK(li.status().code() == ErrorCode::InvalidUsage);
    CHECK_THAT(li.status().message(), Contains(std::string(c.name) + "='" + c.value + "'") &&
                                          Contains("allowed: ") && !Contains("-2147483648"));
  }
  auto largest = loom_env;
  largest["LOOM_WORLD_SIZE"] = "1048576";
  largest["LOOM_RANK"] = "1048575";
  auto li = detect(largest);
  REQUIRE(li.is_ok());
  CHECK(li->world_size == 1048576);
  CHECK(li->rank == 1048575);
}
