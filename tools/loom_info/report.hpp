// What loom-info prints about loom's configuration registry.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.hpp"

namespace loom::info {

/// Every setting with its type, default, source and current value, then its description,
/// grouped by the settings' groups (in declaration order), laid out for `width` columns.
std::string settings_report(const config::Config& config, std::size_t width);

/// One warning line for each LOOM_* variable in the environment that no setting declares.
std::vector<std::string> unknown_variable_warnings(const config::Config& config);

/// The declared setting nearest to `name` (at most 2 edits away), or "" when none is.
std::string_view closest_setting(std::string_view name);

}  // namespace loom::info
