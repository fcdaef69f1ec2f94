// The one way common reports a diagnostic line without depending on the log layer above it:
// the log layer installs a sink (src/log/log.cpp) that writes to its NET logger, so the lines
// keep their subsystem and level. Without a sink (common used alone) the lines are dropped.
#pragma once

#include <string_view>

namespace loom::diag {

enum class Level { Debug, Error };

struct Sink {
  bool (*enabled)(Level) = nullptr;                  // checked before a line is formatted
  void (*write)(Level, std::string_view) = nullptr;  // one whole line
};

/// Installs the sink (the log layer does, once, before the first line can be emitted).
void set_sink(Sink sink);
/// Whether a line of `level` would be written (false without a sink).
bool enabled(Level level);
/// Writes one line through the sink, if any.
void emit(Level level, std::string_view line);

}  // namespace loom::diag
