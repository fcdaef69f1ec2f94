// Single-copy transfers between processes of one host with cross-memory attach
// (process_vm_readv, "CMA"): the receiver reads a large message straight out of the sender's
// buffer, so the payload is copied once instead of into a staging slot and out again. The kernel
// allows it only where ptrace would be allowed (same user, Yama's ptrace_scope, seccomp), so each
// connection probes it once at setup and falls back to the slot rings when it is refused.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/status.hpp"

namespace loom::transport::shm {

/// LOOM_SHM_SINGLE_COPY.
enum class SingleCopy : std::uint8_t { Auto, On, Off };
Result<SingleCopy> parse_single_copy(std::string_view text);

/// Under Yama ptrace_scope 1, only ancestors may read a process's memory, which rules out sibling
/// ranks: declare that any process of ours may (PR_SET_PTRACER_ANY; what ptrace_scope 0 allows
/// anyway). Called once per process when single copy is not off; no-op without Yama or at
/// scopes 0 (nothing to do), 2 and 3 (admin-only: the probe then fails and we fall back).
void allow_peer_reads();

/// Copy rates of this process measured once (GB/s, the best of several 4 MiB transfers, the two
/// kinds alternating so a moment of contention, such as the peer calibrating on the same CPUs,
/// slows both alike): process_vm_readv from ourselves and memcpy. Some kernels and VMs pin
/// pages so slowly that a single-copy read costs more than the slot path: auto checks this.
struct CopyRates {
  double single_copy_gbs = 0;
  double memcpy_gbs = 0;
  /// The slot path's two memcpy's run on two CPUs at once (the sender fills slot k+1 while the
  /// receiver empties slot k), so it moves a message at about one memcpy's rate; a single-copy
  /// read also makes the sender wait until its buffer has been read. It pays only when it reads
  /// at least as fast as memcpy. (At 0.5-0.65 of memcpy, on the 2-vCPU VM, it made a 2-rank
  /// 4 MiB allreduce 4-10x slower than the slots.)
  [[nodiscard]] bool single_copy_pays() const {
    return single_copy_gbs > 0 && single_copy_gbs >= memcpy_gbs;
  }
};
const CopyRates& measured_copy_rates();

/// Reads `len` bytes at `remote` in process `pid` into `local`, looping over partial reads.
/// Errors: PeerFailed when the process has exited, SystemError otherwise (naming `what`).
Status cma_read(pid_t pid, void* local, std::uint64_t remote, std::size_t len,
                std::string_view what);

}  // namespace loom::transport::shm
