// A stand-in for libnvidia-ml.so.1 with the entry points loom's NVLink reader resolves, over a
// fixed 4-GPU host: GPUs at buses 0x10 and 0x11 joined by 4 NVLinks (links 4 and 5 down),
// 0x12 and 0x13 each with 2 links to an NVSwitch, every link past 5 unsupported. Lets the
// tests run the dlopen path of src/device/nvml_reader.cpp on a machine without a GPU.
#include <nvml.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

namespace {

struct FakeLink {
  int state;  // 1 active, 0 down, -1 unsupported
  unsigned remote_bus;
  nvmlIntNvLinkDeviceType_t type;
};

constexpr unsigned kSwitchBus = 0x80;

FakeLink fake_link(unsigned gpu_bus, unsigned link) {
  if (link > 5) return {-1, 0, NVML_NVLINK_DEVICE_TYPE_UNKNOWN};
  if (gpu_bus == 0x10 || gpu_bus == 0x11) {
    if (link < 4) return {1, gpu_bus == 0x10 ? 0x11U : 0x10U, NVML_NVLINK_DEVICE_TYPE_GPU};
    return {0, 0, NVML_NVLINK_DEVICE_TYPE_UNKNOWN};
  }
  if (link < 2) return {1, kSwitchBus, NVML_NVLINK_DEVICE_TYPE_SWITCH};
  return {0, 0, NVML_NVLINK_DEVICE_TYPE_UNKNOWN};
}

unsigned bus_of(nvmlDevice_t d) {
  return static_cast<unsigned>(reinterpret_cast<std::uintptr_t>(d));
}

}  // namespace

extern "C" {

nvmlReturn_t nvmlInit_v2() {
  return NVML_SUCCESS;
}

const char* nvmlErrorString(nvmlReturn_t r) {
  return r == NVML_ERROR_NOT_FOUND ? "Not Found (fake)" : "fake NVML error";
}

nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char* id, nvmlDevice_t* dev) {
  unsigned domain = 0, bus = 0, d = 0, f = 0;
  if (std::sscanf(id, "%x:%x:%x.%x", &domain, &bus, &d, &f) != 4 || bus < 0x10 || bus > 0x13)
    return NVML_ERROR_NOT_FOUND;
  *dev = reinterpret_cast<nvmlDevice_t>(static_cast<std::uintptr_t>(bus));
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t dev, unsigned link, nvmlEnableState_t* on) {
  FakeLink l = fake_link(bus_of(dev), link);
  if (l.state < 0) return NVML_ERROR_INVALID_ARGUMENT;
  *on = l.state == 1 ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t dev, unsigned link,
                                                 nvmlPciInfo_t* pci) {
  FakeLink l = fake_link(bus_of(dev), link);
  if (l.state != 1) return NVML_ERROR_INVALID_ARGUMENT;
  std::memset(pci, 0, sizeof *pci);
  std::snprintf(pci->busId, sizeof pci->busId, "00000000:%02X:00.0", l.remote_bus);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t dev, unsigned link,
                                                 nvmlIntNvLinkDeviceType_t* type) {
  FakeLink l = fake_link(bus_of(dev), link);
  if (l.state != 1) return NVML_ERROR_INVALID_ARGUMENT;
  *type = l.type;
  return NVML_SUCCESS;
}

}  // extern "C"
