#include "launch/hostlist.hpp"

#include <charconv>

namespace loom::launch {
namespace {

Status bad(std::string_view text, std::string_view why) {
  return make_error(ErrorCode::InvalidArgument, "malformed hostlist \"{}\": {}", text, why);
}

/// Splits at commas that are not inside brackets.
Result<std::vector<std::string_view>> split_top(std::string_view text) {
  std::vector<std::string_view> parts;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    char c = i < text.size() ? text[i] : ',';
    if (c == '[' && ++depth > 1) return bad(text, "nested '['");
    if (c == ']' && --depth < 0) return bad(text, "']' without '['");
    if (c == ',' && depth == 0) {
      std::string_view part = text.substr(start, i - start);
      if (part.empty()) return bad(text, "empty host name");
      parts.push_back(part);
      start = i + 1;
    }
  }
  if (depth != 0) return bad(text, "'[' without ']'");
  return parts;
}

Result<unsigned long> number(std::string_view all, std::string_view digits) {
  unsigned long v = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size())
    return bad(all, fmt::format("\"{}\" is not a number", digits));
  return v;
}

/// "01-04,07" -> {"01","02","03","04","07"}.
Result<std::vector<std::string>> expand_ranges(std::string_view all, std::string_view body,
                                               std::size_t max_hosts) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= body.size(); ++i) {
    if (i < body.size() && body[i] != ',') continue;
    std::string_view item = body.substr(start, i - start);
    start = i + 1;
    std::size_t dash = item.find('-');
    std::string_view lo_s = item.substr(0, dash);
    std::string_view hi_s = dash == std::string_view::npos ? lo_s : item.substr(dash + 1);
    auto lo = number(all, lo_s);
    if (!lo.is_ok()) return lo.status();
    auto hi = number(all, hi_s);
    if (!hi.is_ok()) return hi.status();
    if (*hi < *lo) return bad(all, fmt::format("range \"{}\" goes backwards", item));
    if (*hi - *lo >= max_hosts) return bad(all, "expands to too many hosts");
    std::size_t width = lo_s.size();  // Slurm pads every value to the lower bound's width
    for (unsigned long v = *lo; v <= *hi; ++v) out.push_back(fmt::format("{:0{}}", v, width));
    if (out.size() > max_hosts) return bad(all, "expands to too many hosts");
  }
  return out;
}

/// One element ("a[1-2]b[3,4]c") -> its host names, leftmost bracket varying slowest.
Status expand_one(std::string_view all, std::string_view elem, std::size_t max_hosts,
                  std::vector<std::string>& out) {
  std::vector<std::string> names{""};
  std::size_t pos = 0;
  while (pos < elem.size()) {
    std::size_t open = elem.find('[', pos);
    std::string_view literal = elem.substr(pos, open - pos);
    for (auto& n : names) n += literal;
    if (open == std::string_view::npos) break;
    std::size_t close = elem.find(']', open);
    auto values = expand_ranges(all, elem.substr(open + 1, close - open - 1), max_hosts);
    if (!values.is_ok()) return values.status();
    if (names.size() * values->size() > max_hosts) return bad(all, "expands to too many hosts");
    std::vector<std::string> next;
    next.reserve(names.size() * values->size());
    for (const auto& n : names)
      for (const auto& v : *values) next.push_back(n + v);
    names = std::move(next);
    pos = close + 1;
  }
  if (out.size() + names.size() > max_hosts) return bad(all, "expands to too many hosts");
  for (auto& n : names) out.push_back(std::move(n));
  return Status::ok();
}

}  // namespace

Result<std::vector<std::string>> expand_hostlist(std::string_view text, std::size_t max_hosts) {
  auto parts = split_top(text);
  if (!parts.is_ok()) return parts.status();
  std::vector<std::string> hosts;
  for (std::string_view p : *parts) LOOM_RETURN_IF_ERROR(expand_one(text, p, max_hosts, hosts));
  return hosts;
}

Result<std::string> first_host(std::string_view text) {
  auto hosts = expand_hostlist(text);
  if (!hosts.is_ok()) return hosts.status();
  return hosts->front();
}

}  // namespace loom::launch
