// Settings whose value is one of a few names (LOOM_SHM_SLOT_ORDER=auto|reuse|rotate, ...).
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include "common/status.hpp"

namespace loom {

/// The value that `text` names among `choices`, or InvalidUsage naming the setting and the
/// choices: "SETTING='text' is not one of: a, b, c".
template <typename E>
Result<E> parse_choice(std::string_view setting, std::string_view text,
                       std::initializer_list<std::pair<std::string_view, E>> choices) {
  std::string names;
  for (const auto& [name, value] : choices) {
    if (text == name) return value;
    if (!names.empty()) names += ", ";
    names += name;
  }
  return make_error(ErrorCode::InvalidUsage, "{}='{}' is not one of: {}", setting, text, names);
}

}  // namespace loom
