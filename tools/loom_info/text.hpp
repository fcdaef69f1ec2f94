// Plain-text layout helpers for loom-info.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace loom::info {

/// The width to lay text out in: the terminal's when stdout is one, else 100 columns.
std::size_t output_width();

/// Splits `text` into lines of at most `width` characters at spaces (a longer word gets a line
/// of its own).
std::vector<std::string> wrap(std::string_view text, std::size_t width);

/// `text` padded with spaces to `width` characters (unchanged when it is longer).
std::string pad(std::string_view text, std::size_t width);

/// The Damerau-Levenshtein (optimal string alignment) distance between `a` and `b`: the number
/// of inserted, deleted or changed characters and swapped neighbours.
std::size_t edit_distance(std::string_view a, std::string_view b);

}  // namespace loom::info
