// Store values of failure sharing and hang attribution: text, validated on decode (a foreign or
// corrupt value is ignored, never trusted).
#include <charconv>

#include "core/failure_monitor.hpp"

namespace loom::detail {
namespace {

constexpr std::size_t kMaxMessage = 4096;

// Splits off the first `n` space-separated integers of the first line; the rest after '\n'.
bool parse_ints(std::string_view& text, std::int64_t* out, int n) {
  for (int i = 0; i < n; ++i) {
    auto end = text.find_first_of(i + 1 < n ? " " : "\n");
    if (end == std::string_view::npos) return false;
    std::string_view field = text.substr(0, end);
    auto [ptr, ec] = std::from_chars(field.data(), field.data() + field.size(), out[i]);
    if (field.empty() || ec != std::errc() || ptr != field.data() + field.size()) return false;
    text.remove_prefix(end + 1);
  }
  return true;
}

std::string clip(std::string_view s) {
  return std::string(s.substr(0, kMaxMessage));
}

}  // namespace

std::string encode_failure(const FailureRecord& r) {
  return fmt::format("{} {} {}\n{}", static_cast<int>(r.code), r.rank, r.reporter, clip(r.message));
}

std::optional<FailureRecord> decode_failure(std::string_view text, int nranks) {
  std::int64_t v[3];
  if (text.size() > kMaxMessage + 64 || !parse_ints(text, v, 3)) return std::nullopt;
  auto code = static_cast<ErrorCode>(v[0]);
  if (code != ErrorCode::PeerFailed && code != ErrorCode::Mismatch) return std::nullopt;
  if (v[1] < 0 || v[1] >= nranks || v[2] < 0 || v[2] >= nranks) return std::nullopt;
  return FailureRecord{code, static_cast<int>(v[1]), static_cast<int>(v[2]), std::string(text)};
}

std::string encode_progress(const RankProgress& p) {
  return fmt::format("{} {} {} {}\n{}", p.submitted, p.completed, p.current_seq, p.derived,
                     clip(p.current));
}

std::optional<RankProgress> decode_progress(std::string_view text) {
  std::int64_t v[4];
  if (text.size() > kMaxMessage + 64 || !parse_ints(text, v, 4)) return std::nullopt;
  if (v[0] < -1 || v[1] < -1 || v[2] < -1 || v[3] < 0) return std::nullopt;
  return RankProgress{v[0], v[1], v[2], std::string(text), v[3]};
}

std::string format_rank_ranges(const std::vector<int>& ranks) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += j == i ? std::to_string(ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]);
    i = j + 1;
  }
  return out;
}

std::string hang_report(std::int64_t seq, const std::string& what,
                        const std::vector<std::optional<RankProgress>>& answers,
                        const std::vector<RankIdentity>& who) {
  std::vector<int> reached;
  std::vector<std::string> behind;
  for (std::size_t r = 0; r < answers.size(); ++r) {
    const RankIdentity& id = who[r];
    std::string where = fmt::format("host {}, pid {}", id.host, id.pid);
    const auto& a = answers[r];
    if (!a) {
      behind.push_back(fmt::format("rank {} did not answer ({})", r, where));
    } else if (a->submitted >= seq) {
      reached.push_back(static_cast<int>(r));
    } else if (a->completed < 0) {
      behind.push_back(fmt::format("rank {} has not completed any operation ({})", r, where));
    } else {
      behind.push_back(fmt::format("rank {} last completed #{} ({})", r, a->completed, where));
    }
  }
  std::string out = fmt::format("{} timed out: ", what);
  if (!reached.empty())
    out += fmt::format("{} {} reached #{}", reached.size() == 1 ? "rank" : "ranks",
                       format_rank_ranges(reached), seq);
  for (const auto& b : behind) out += "; " + b;
  if (behind.empty()) out += " (every rank reached it: a transport or a slow peer is stuck)";
  return out;
}

}  // namespace loom::detail
