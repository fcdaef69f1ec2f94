// The host simulation of the device seam ("host-sim", see device.hpp), for tests, tools and
// benchmarks: part of the testing library loom_testing (cmake/LoomTesting.cmake), not of
// libloom. A program linking loom_testing finds it by LOOM_DEVICE=host-sim: it registers itself
// in the device-runtime registry when the program starts.
#pragma once

#include <cstdint>
#include <vector>

#include "device/device.hpp"

namespace loom::device {

/// The host simulation (one per process).
Device& host_sim();
/// Reduction kernels the host simulation has launched so far (reduce_async calls): lets tests
/// tell a collective reduced on the device from one that reduced on the host.
std::uint64_t host_sim_reduce_launches();
/// Marks host-sim stream `s` as being captured into a graph (or not): is_capturing() says so,
/// as CUDA does between cudaStreamBeginCapture and cudaStreamEndCapture. For tests.
void host_sim_set_capturing(Stream s, bool capturing);
/// Frees the host simulation saw while a host function held a stream (see host_sim_device.cpp):
/// on CUDA such a free waits for the whole device and could deadlock. Tests expect 0.
std::uint64_t host_sim_sync_hazards();
/// wait_value() waits host-sim's streams have run (tests tell a wait-value stream gate from a
/// host-function one).
std::uint64_t host_sim_value_waits();
/// flush_remote_writes() calls the host simulation has had (tests check the network path
/// flushes before its reductions read what a NIC wrote).
std::uint64_t host_sim_remote_write_flushes();
/// Restricts the calling thread's view of host-sim's 8 devices to `physical` (in that order),
/// as CUDA_VISIBLE_DEVICES does a process's: ordinal i is then physical[i]; empty shows all.
/// Lets tests run ranks that each see only "their" GPU as device 0.
void host_sim_set_visible_devices(std::vector<int> physical);
/// Multi-buffer kernels (reduce_multi_async) launched so far: tests tell the peer-read route
/// from the others by them.
std::uint64_t host_sim_multi_launches();
/// IPC handles opened (ipc_open) and closed (ipc_close) so far: tests watch the peer-read
/// route's handle cache through them.
std::uint64_t host_sim_ipc_opens();
std::uint64_t host_sim_ipc_closes();
/// While on, a freed device allocation is kept and the next allocation of the same (rounded)
/// size gets its address back, with a new allocation id: a caching allocator's reuse, made
/// certain for tests of "an address freed and reallocated".
void host_sim_reuse_addresses(bool on);
/// ipc_handle() refuses the allocation holding `p` from now on, as cudaIpcGetMemHandle refuses
/// memory of a stream-ordered pool (cudaMallocAsync) or of cuMemCreate without an IPC handle
/// type.
void host_sim_refuse_ipc(const void* p);

}  // namespace loom::device

/// Registers host-sim as "host-sim" (device::register_runtime). Runs by itself when a program
/// linking loom_testing starts; loom_testing's link options name it, so a static link keeps it.
extern "C" void loom_testing_register_host_sim();
