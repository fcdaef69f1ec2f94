// One logging setup for the whole library: an spdlog logger per subsystem, configured from
// LOOM_DEBUG, LOOM_DEBUG_SUBSYS and LOOM_DEBUG_FILE.
#pragma once

#include <spdlog/spdlog.h>

#include "config/config.hpp"

namespace loom::log {

enum class Subsys { Init = 0, Bootstrap, Coll, Net, Exec, Config, Shm, Topo, Cuda };
inline constexpr int kNumSubsys = 9;

/// Applies the logging settings of `cfg`. The first successful call in a process configures the
/// sinks; later calls only adjust levels. A LOOM_DEBUG_FILE that cannot be opened for writing is
/// InvalidUsage naming the path and the system's reason (nothing is changed then, so the next
/// call tries again): its logs would otherwise be lost without a word.
[[nodiscard]] Status configure(const config::Config& cfg);
/// The logger of one subsystem (usable before configure(): then WARN and above to stderr).
spdlog::logger& get(Subsys s);

}  // namespace loom::log

// The level is checked before the arguments are evaluated, so a disabled DEBUG line on a hot
// path costs one load and compare (no formatting, no describe() strings).
#define LOOM_LOG_AT(sub, lvl, ...)                                        \
  do {                                                                    \
    auto& loom_logger_ = ::loom::log::get(::loom::log::Subsys::sub);      \
    if (loom_logger_.should_log(lvl)) loom_logger_.log(lvl, __VA_ARGS__); \
  } while (0)
#define LOOM_LOG_TRACE(sub, ...) LOOM_LOG_AT(sub, ::spdlog::level::trace, __VA_ARGS__)
#define LOOM_LOG_DEBUG(sub, ...) LOOM_LOG_AT(sub, ::spdlog::level::debug, __VA_ARGS__)
#define LOOM_LOG_INFO(sub, ...) LOOM_LOG_AT(sub, ::spdlog::level::info, __VA_ARGS__)
#define LOOM_LOG_WARN(sub, ...) LOOM_LOG_AT(sub, ::spdlog::level::warn, __VA_ARGS__)
#define LOOM_LOG_ERROR(sub, ...) LOOM_LOG_AT(sub, ::spdlog::level::err, __VA_ARGS__)
