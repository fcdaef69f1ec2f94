// Single-copy transfers between processes of one host with cross-memory attach
// (process_vm_readv, "CMA"): the receiver reads a large message straight out of the sender's
// buffer, so the payload is copied once instead of into a staging slot and out again. The kernel
// allows it only where ptrace would be allowed (same user, Yama's ptrace_scope, seccomp), so each
// connection probes it once at setup and falls back to the slot rings when it is refused.
//
// Which messages take it (docs/transports.md, "Single copy"): where process_vm_readv copies at
// least at memcpy's rate, every message of at least LOOM_SHM_SINGLE_COPY_MIN bytes. Where it is
// slower (pinning pages costs more than copying them on some kernels and VMs), only messages the
// receiver copies (not those it reduces) of at most LOOM_SHM_SINGLE_COPY_MAX bytes: there the
// slot path pipelines a large message's two copies, but a message of one slot cannot overlap
// them, and its receiver waits for the sender's whole copy and a wake-up.
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

/// What a receiver reads in place, published in its channel's header (ChannelHeader::single_copy)
/// for the sender, which publishes single-copy descriptors only for those messages.
enum SingleCopyReads : std::uint32_t {
  kReadsNone = 0,
  kReadsCopies = 1,      // messages it copies out (receives)
  kReadsReductions = 2,  // messages it reduces on arrival (receive-reduce)
  kReadsAnySize = 4,     // of any size (else at most the sender's LOOM_SHM_SINGLE_COPY_MAX)
};
inline constexpr std::uint32_t kReadsAll = kReadsCopies | kReadsReductions | kReadsAnySize;

/// True for the messages a receiver may reduce on arrival: those of the reducing collectives.
bool message_may_be_reduced(std::uint8_t tag_kind);
/// True for the messages of all-to-all(v) and send/recv, where every rank sends and receives
/// alike.
bool message_is_exchange(std::uint8_t tag_kind);

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
  /// The messages a receiver reads in place under LOOM_SHM_SINGLE_COPY=auto once its probe read
  /// succeeded: all where single copy pays, else the ones it copies (up to a size limit).
  [[nodiscard]] std::uint32_t auto_reads() const {
    return single_copy_pays() ? kReadsAll : kReadsCopies;
  }
};
const CopyRates& measured_copy_rates();

/// Reads `len` bytes at `remote` in process `pid` into `local`, looping over partial reads.
/// Errors: PeerFailed when the process has exited, SystemError otherwise (naming `what`).
/// Message bytes this process has received with process_vm_readv (tests check that the route
/// is taken); probes and calibration not counted.
std::uint64_t cma_bytes_received();
void count_cma_bytes(std::uint64_t n);

Status cma_read(pid_t pid, void* local, std::uint64_t remote, std::size_t len,
                std::string_view what);

}  // namespace loom::transport::shm
