#include "selector/plan_policy.hpp"

#include <algorithm>

#include "algorithms/ring.hpp"
#include "selector/shared_cpu.hpp"

namespace loom::select {

Result<std::size_t> chunk_from(const config::Config& cfg) {
  const std::string text = cfg.get_string("LOOM_CHUNK_SIZE");
  if (text == "auto") return std::size_t{0};
  auto bytes = config::parse_size(text);
  if (!bytes)
    return make_error(ErrorCode::InvalidUsage, "LOOM_CHUNK_SIZE='{}' is not auto or a size ({})",
                      text, bytes.status().message());
  if (*bytes < 64 || *bytes > (1ull << 30))
    return make_error(ErrorCode::InvalidUsage, "LOOM_CHUNK_SIZE={} is outside [64, 1G]", *bytes);
  return static_cast<std::size_t>(*bytes);
}

Result<std::size_t> oneshot_max_from(const std::string& text, int nranks) {
  constexpr std::size_t kLine = 64;
  if (text == "auto") {
    const std::size_t per_rank = kOneshotReadBytes / static_cast<std::size_t>(std::max(nranks, 1));
    return std::min(kOneshotMaxBytes, per_rank / kLine * kLine);
  }
  auto bytes = config::parse_size(text);
  if (!bytes || *bytes > (std::uint64_t{1} << 20))
    return make_error(ErrorCode::InvalidUsage,
                      "LOOM_SHM_ONESHOT_MAX='{}' is not auto or a size from 0 to 1M", text);
  return static_cast<std::size_t>(*bytes);
}

Result<std::size_t> arena_piece_from(const std::string& text, int nranks) {
  constexpr std::size_t kLine = 64;
  std::size_t bytes = 0;
  if (text == "auto") {
    const std::size_t per_rank =
        kArenaPieceAllRanksBytes / static_cast<std::size_t>(std::max(nranks, 1));
    bytes = std::max(kArenaMinPieceBytes, std::min(kArenaPieceBytes, per_rank));
  } else {
    auto parsed = config::parse_size(text);
    if (!parsed || (*parsed != 0 && (*parsed < kArenaMinPieceBytes ||
                                     *parsed > std::uint64_t{kArenaMaxPieceBytes})))
      return make_error(ErrorCode::InvalidUsage,
                        "LOOM_SHM_ARENA_PIECE='{}' is not auto, 0 or a size from 4K to 1M", text);
    bytes = static_cast<std::size_t>(*parsed);
  }
  if (nranks < kArenaPieceMinRanks) return std::size_t{0};
  return bytes / kLine * kLine;
}

std::size_t ring_min_step_part_bytes(const Shape& s) {
  return cpu_load(s) > 1 ? algo::kSharedCpuMinStepPartBytes : algo::kMinStepPartBytes;
}

}  // namespace loom::select
