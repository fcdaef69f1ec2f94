// A peer's shared buffers (loom::host_alloc, common/shared_buffers.hpp), mapped read-only in
// this process for single-copy receives: the descriptor names the buffer by the sender's memfd
// number and generation; the first message from a buffer opens /proc/<pid>/fd/<fd> and maps
// it, later ones reuse the mapping. A mapping keeps its buffer's memory alive, so a peer that
// frees a buffer never leaves us reading unmapped memory; the oldest mappings are dropped
// beyond a bound.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/shared_buffers.hpp"
#include "common/status.hpp"

namespace loom::transport::shm {

class PeerBuffers {
 public:
  PeerBuffers() = default;
  ~PeerBuffers();
  PeerBuffers(const PeerBuffers&) = delete;
  PeerBuffers& operator=(const PeerBuffers&) = delete;

  /// [offset, offset + len) of process `pid`'s buffer (memfd `fd`, generation `gen`).
  Result<const std::uint8_t*> map(pid_t pid, std::int64_t fd, std::uint64_t gen,
                                  std::uint64_t offset, std::uint64_t len);

 private:
  struct Mapped {
    std::int64_t fd;
    std::uint64_t gen;
    void* base;
    std::size_t size;
  };
  static constexpr std::size_t kMaxMapped = 64;
  std::vector<Mapped> maps_;  // least recently mapped first
};

/// Bytes received by reading mapped shared buffers, by every connection of this process (for
/// tests and diagnostics).
std::uint64_t mapped_bytes_received();
void count_mapped_bytes(std::uint64_t n);

}  // namespace loom::transport::shm
