// Lives below the transports now (src/device_api/ipc_peers.hpp); see src/device/device.hpp.
#pragma once

#include "device_api/ipc_peers.hpp"  // IWYU pragma: export
