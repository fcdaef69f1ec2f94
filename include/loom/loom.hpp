// Umbrella header: everything a loom user needs.
#pragma once

#include "loom/communicator.hpp"
#include "loom/error.hpp"
#include "loom/memory.hpp"
#include "loom/options.hpp"
#include "loom/types.hpp"
#include "loom/unique_id.hpp"
#include "loom/version.hpp"
#include "loom/work.hpp"
