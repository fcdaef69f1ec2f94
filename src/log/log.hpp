// One logging setup for the whole library: an spdlog logger per subsystem, configured from
// LOOM_DEBUG, LOOM_DEBUG_SUBSYS and LOOM_DEBUG_FILE.
#pragma once

#include <spdlog/spdlog.h>

#include "config/config.hpp"

namespace loom::log {

enum class Subsys { Init = 0, Bootstrap, Coll, Net, Exec, Config, Shm, Topo, Cuda };
inline constexpr int kNumSubsys = 9;

/// Applies the logging settings of `cfg`. The first call in a process configures the sinks;
/// later calls only adjust levels.
void configure(const config::Config& cfg);
/// The logger of one subsystem (usable before configure(): then WARN and above to stderr).
spdlog::logger& get(Subsys s);

}  // namespace loom::log

#define LOOM_LOG_TRACE(sub, ...) ::loom::log::get(::loom::log::Subsys::sub).trace(__VA_ARGS__)
#define LOOM_LOG_DEBUG(sub, ...) ::loom::log::get(::loom::log::Subsys::sub).debug(__VA_ARGS__)
#define LOOM_LOG_INFO(sub, ...) ::loom::log::get(::loom::log::Subsys::sub).info(__VA_ARGS__)
#define LOOM_LOG_WARN(sub, ...) ::loom::log::get(::loom::log::Subsys::sub).warn(__VA_ARGS__)
#define LOOM_LOG_ERROR(sub, ...) ::loom::log::get(::loom::log::Subsys::sub).error(__VA_ARGS__)
