// The device seam now lives below the transports (src/device_api/device.hpp), so that the
// cuda_ipc transport can use it without including the device layer above it.
#pragma once

#include "device_api/device.hpp"  // IWYU pragma: export
