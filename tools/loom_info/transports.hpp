// `loom-info --transports`: which transports this host offers and what each can do.
#pragma once

#include <string>

#include "config/config.hpp"

namespace loom::info {

/// The transports table, the libfabric providers, and the default choice with the current
/// settings.
std::string transports_report(const config::Config& config);

}  // namespace loom::info
