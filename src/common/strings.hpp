// Small string helpers shared by the settings parsers and the bootstrap records.
#pragma once

#include <string_view>
#include <vector>

namespace loom {

/// The non-empty comma-separated entries of `text` ("a,,b" -> {"a", "b"}); views into `text`.
inline std::vector<std::string_view> comma_tokens(std::string_view text) {
  std::vector<std::string_view> out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find(',', pos);
    if (end == std::string_view::npos) end = text.size();
    if (end > pos) out.push_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

}  // namespace loom
