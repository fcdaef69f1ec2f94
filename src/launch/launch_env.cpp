#include "launch/launch_env.hpp"

#include <charconv>
#include <cstdint>
#include <limits>
#include <vector>

#include "launch/hostlist.hpp"

namespace loom::launch {
namespace {

// Rank and size variables are integers of the registry whose ranges (config::kMaxRanks) keep
// them within int: never wrapped (LOOM_RANK=4294967297 is refused there, not taken as rank 1).
static_assert(config::kMaxRanks <= std::numeric_limits<int>::max());

Status missing(const std::string& flavour, const std::vector<std::string>& names,
               const std::vector<std::string>& found) {
  std::string f;
  for (const auto& n : found) f += (f.empty() ? "" : ", ") + n;
  std::string m;
  for (const auto& n : names) m += (m.empty() ? "" : ", ") + n;
  return make_error(ErrorCode::InvalidUsage,
                    "incomplete {} launch environment: missing {} (found: {})", flavour, m,
                    f.empty() ? "nothing" : f);
}

Status check_same(const config::Config& cfg, const char* a, const char* b) {
  if (cfg.has(a) && cfg.has(b) && cfg.get_int(a) != cfg.get_int(b))
    return make_error(ErrorCode::InvalidUsage, "contradictory environment: {}={} but {}={}", a,
                      cfg.get_int(a), b, cfg.get_int(b));
  return Status::ok();
}

Status check_range(const LaunchInfo& li) {
  if (li.world_size < 1)
    return make_error(ErrorCode::InvalidUsage, "world size {} must be at least 1 ({} launch)",
                      li.world_size, li.source);
  if (li.rank < 0 || li.rank >= li.world_size)
    return make_error(ErrorCode::InvalidUsage, "rank {} is outside [0, {}) ({} launch)", li.rank,
                      li.world_size, li.source);
  return Status::ok();
}

Result<LaunchInfo> from_loom(const config::Config& cfg) {
  std::vector<std::string> found{"LOOM_RANK"}, lacking;
  if (cfg.has("LOOM_WORLD_SIZE"))
    found.emplace_back("LOOM_WORLD_SIZE");
  else
    lacking.emplace_back("LOOM_WORLD_SIZE");
  bool has_root = cfg.has("LOOM_ROOT") || cfg.has("LOOM_ID");
  if (!has_root) lacking.emplace_back("LOOM_ROOT (or LOOM_ID)");
  if (!lacking.empty()) return missing("loom", lacking, found);
  LaunchInfo li;
  li.source = "loom";
  li.rank = static_cast<int>(cfg.get_int("LOOM_RANK"));
  li.world_size = static_cast<int>(cfg.get_int("LOOM_WORLD_SIZE"));
  li.local_rank =
      cfg.has("LOOM_LOCAL_RANK") ? static_cast<int>(cfg.get_int("LOOM_LOCAL_RANK")) : -1;
  li.root = cfg.get_string("LOOM_ROOT");
  li.id_hex = cfg.get_string("LOOM_ID");
  li.secret_hex = cfg.get_string("LOOM_SECRET");
  LOOM_RETURN_IF_ERROR(check_range(li));
  return li;
}

Result<LaunchInfo> from_torchrun(const config::Config& cfg) {
  std::vector<std::string> found{"RANK"}, lacking;
  for (const char* n : {"WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"})
    (cfg.has(n) ? found : lacking).emplace_back(n);
  if (!lacking.empty()) return missing("torchrun", lacking, found);
  LaunchInfo li;
  li.source = "torchrun";
  li.rank = static_cast<int>(cfg.get_int("RANK"));
  li.world_size = static_cast<int>(cfg.get_int("WORLD_SIZE"));
  li.local_rank = cfg.has("LOCAL_RANK") ? static_cast<int>(cfg.get_int("LOCAL_RANK")) : -1;
  std::string host = cfg.get_string("MASTER_ADDR");
  bool v6 = host.find(':') != std::string::npos && host.front() != '[';
  li.root = v6 ? fmt::format("[{}]:{}", host, cfg.get_int("MASTER_PORT"))
               : fmt::format("{}:{}", host, cfg.get_int("MASTER_PORT"));
  li.secret_hex = cfg.get_string("LOOM_SECRET");
  LOOM_RETURN_IF_ERROR(check_range(li));
  return li;
}

/// Rendezvous port of a Slurm job: LOOM_PORT, else derived from the job and step ids so that
/// every task of a step computes the same one and concurrent steps rarely collide.
Result<int> slurm_port(const config::Config& cfg) {
  if (cfg.has("LOOM_PORT")) {
    auto p = cfg.get_int("LOOM_PORT");
    if (p < 1 || p > 65535)
      return make_error(ErrorCode::InvalidUsage, "LOOM_PORT={} is not a TCP port", p);
    return static_cast<int>(p);
  }
  auto id = [&](const char* name) -> std::uint64_t {
    std::string v = cfg.get_string(name);
    std::uint64_t n = 0;
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec == std::errc() && end == v.data() + v.size()) return n;
    std::uint64_t h = 1469598103934665603ull;  // FNV-1a for non-numeric ids ("123_4", "batch")
    for (char c : v) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    return h;
  };
  std::uint64_t step = cfg.has("SLURM_STEP_ID") ? id("SLURM_STEP_ID") : 0;
  return static_cast<int>(20000 + (id("SLURM_JOB_ID") * 37 + step) % 10000);
}

const char* slurm_nodelist(const config::Config& cfg) {
  if (cfg.has("SLURM_STEP_NODELIST")) return "SLURM_STEP_NODELIST";
  if (cfg.has("SLURM_JOB_NODELIST")) return "SLURM_JOB_NODELIST";
  return nullptr;
}

/// Root from LOOM_ROOT / LOOM_ID, else the first node of the Slurm node list and the Slurm port.
/// `lacking` collects what neither offers.
Status slurm_root(const config::Config& cfg, LaunchInfo& li, std::vector<std::string>& found,
                  std::vector<std::string>& lacking) {
  li.id_hex = cfg.get_string("LOOM_ID");
  li.secret_hex = cfg.get_string("LOOM_SECRET");
  if (cfg.has("LOOM_ROOT") || cfg.has("LOOM_ID")) {
    found.emplace_back(cfg.has("LOOM_ROOT") ? "LOOM_ROOT" : "LOOM_ID");
    li.root = cfg.get_string("LOOM_ROOT");
    li.detail = cfg.has("LOOM_ROOT") ? "root from LOOM_ROOT" : "root from LOOM_ID";
    return Status::ok();
  }
  const char* list = slurm_nodelist(cfg);
  bool port_known = cfg.has("LOOM_PORT") || cfg.has("SLURM_JOB_ID");
  if (list) found.emplace_back(list);
  if (cfg.has("SLURM_JOB_ID")) found.emplace_back("SLURM_JOB_ID");
  if (!list || !port_known) {
    if (!list) lacking.emplace_back("SLURM_STEP_NODELIST or SLURM_JOB_NODELIST (or LOOM_ROOT)");
    if (!port_known) lacking.emplace_back("SLURM_JOB_ID (or LOOM_PORT)");
    return Status::ok();
  }
  auto host = first_host(cfg.get_string(list));
  if (!host.is_ok())
    return make_error(ErrorCode::InvalidUsage, "{}: {}", list, host.status().message());
  auto port = slurm_port(cfg);
  if (!port.is_ok()) return port.status();
  li.root = fmt::format("{}:{}", *host, *port);
  li.detail = fmt::format("root {} = first host of {}, port {}", li.root, list,
                          cfg.has("LOOM_PORT") ? "LOOM_PORT" : "from SLURM_JOB_ID/SLURM_STEP_ID");
  return Status::ok();
}

Result<LaunchInfo> from_slurm(const config::Config& cfg) {
  std::vector<std::string> found{"SLURM_PROCID"}, lacking;
  (cfg.has("SLURM_NTASKS") ? found : lacking).emplace_back("SLURM_NTASKS");
  // A batch script has SLURM_PROCID=0 and the allocation's SLURM_NTASKS but no step: joining
  // as "rank 0 of N" there would wait for ranks that never start.
  if (cfg.has("SLURM_STEP_ID"))
    found.emplace_back("SLURM_STEP_ID");
  else
    lacking.emplace_back(
        "SLURM_STEP_ID (set by srun; without it this is the batch script, "
        "not an srun task: start the ranks with srun)");
  LaunchInfo li;
  li.source = "slurm";
  LOOM_RETURN_IF_ERROR(slurm_root(cfg, li, found, lacking));
  if (!lacking.empty()) return missing("Slurm", lacking, found);
  li.rank = static_cast<int>(cfg.get_int("SLURM_PROCID"));
  li.world_size = static_cast<int>(cfg.get_int("SLURM_NTASKS"));
  li.local_rank = cfg.has("SLURM_LOCALID") ? static_cast<int>(cfg.get_int("SLURM_LOCALID")) : -1;
  LOOM_RETURN_IF_ERROR(check_range(li));
  return li;
}

Result<LaunchInfo> from_mpirun(const config::Config& cfg) {
  std::vector<std::string> found{"OMPI_COMM_WORLD_RANK"}, lacking;
  (cfg.has("OMPI_COMM_WORLD_SIZE") ? found : lacking).emplace_back("OMPI_COMM_WORLD_SIZE");
  LaunchInfo li;
  li.source = "mpirun";
  if (cfg.has("LOOM_ROOT") || cfg.has("LOOM_ID") || slurm_nodelist(cfg)) {
    LOOM_RETURN_IF_ERROR(slurm_root(cfg, li, found, lacking));
  } else {
    lacking.emplace_back("LOOM_ROOT (or LOOM_ID)");
  }
  if (!lacking.empty()) return missing("Open MPI mpirun", lacking, found);
  li.rank = static_cast<int>(cfg.get_int("OMPI_COMM_WORLD_RANK"));
  li.world_size = static_cast<int>(cfg.get_int("OMPI_COMM_WORLD_SIZE"));
  li.local_rank = cfg.has("OMPI_COMM_WORLD_LOCAL_RANK")
                      ? static_cast<int>(cfg.get_int("OMPI_COMM_WORLD_LOCAL_RANK"))
                      : -1;
  bool differs = (cfg.has("SLURM_PROCID") && cfg.get_int("SLURM_PROCID") != li.rank) ||
                 (cfg.has("SLURM_NTASKS") && cfg.get_int("SLURM_NTASKS") != li.world_size);
  if (differs)
    li.detail += fmt::format(
        "; OMPI_COMM_WORLD_* win over the enclosing Slurm allocation's "
        "SLURM_PROCID={} SLURM_NTASKS={}",
        cfg.raw("SLURM_PROCID"), cfg.raw("SLURM_NTASKS"));
  LOOM_RETURN_IF_ERROR(check_range(li));
  return li;
}

}  // namespace

Result<LaunchInfo> detect_launch(const config::Config& cfg) {
  LOOM_RETURN_IF_ERROR(check_same(cfg, "LOOM_RANK", "RANK"));
  LOOM_RETURN_IF_ERROR(check_same(cfg, "LOOM_WORLD_SIZE", "WORLD_SIZE"));
  if (cfg.has("LOOM_RANK")) return from_loom(cfg);
  if (cfg.has("RANK")) return from_torchrun(cfg);
  // srun never sets OMPI_COMM_WORLD_*: when present, mpirun started this process (perhaps
  // inside a Slurm allocation, whose SLURM_* then describe the allocation, not this process).
  if (cfg.has("OMPI_COMM_WORLD_RANK")) return from_mpirun(cfg);
  if (cfg.has("SLURM_PROCID")) return from_slurm(cfg);
  std::vector<std::string> found;
  for (const char* n : {"LOOM_WORLD_SIZE", "LOOM_ROOT", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                        "SLURM_NTASKS", "SLURM_JOB_NODELIST", "OMPI_COMM_WORLD_SIZE"})
    if (cfg.has(n)) found.emplace_back(n);
  return missing("loom, torchrun, Slurm or mpirun",
                 {"LOOM_RANK (or RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK)"}, found);
}

}  // namespace loom::launch
