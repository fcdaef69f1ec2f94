// loom-stream-check's long-running producer on a real GPU (spin_kernel.cu): a kernel that spins
// on the GPU's global timer for `ns` nanoseconds, then writes data[i] = base + i % 1000.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {
/// Enqueues the kernel on `stream` (a cudaStream_t); returns the launch's cudaError_t.
int loom_stream_check_spin(void* stream, std::int32_t* data, std::size_t n, std::int32_t base,
                           std::uint64_t ns);
}
