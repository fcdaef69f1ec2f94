#include "core/launch_env.hpp"

#include <vector>

namespace loom::core {
namespace {

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

}  // namespace

Result<LaunchInfo> detect_launch(const config::Config& cfg) {
  LOOM_RETURN_IF_ERROR(check_same(cfg, "LOOM_RANK", "RANK"));
  LOOM_RETURN_IF_ERROR(check_same(cfg, "LOOM_WORLD_SIZE", "WORLD_SIZE"));
  if (cfg.has("LOOM_RANK")) return from_loom(cfg);
  if (cfg.has("RANK")) return from_torchrun(cfg);
  std::vector<std::string> found;
  for (const char* n : {"LOOM_WORLD_SIZE", "LOOM_ROOT", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"})
    if (cfg.has(n)) found.emplace_back(n);
  return missing("loom or torchrun", {"LOOM_RANK (or RANK)"}, found);
}

}  // namespace loom::core
