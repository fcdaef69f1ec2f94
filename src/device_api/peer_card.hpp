// What one rank tells the others about one call of the peer-read route (src/device/
// peer_read.hpp): the call itself, to be compared, and where its buffers are, as CUDA IPC
// references that the others open (ipc_cache.hpp). Plain data: cuda_ipc's board
// (transports/cuda_ipc/peer_board.hpp) copies it through host shared memory.
#pragma once

#include <cstdint>
#include <type_traits>

#include "device_api/device.hpp"

namespace loom::device {

/// One buffer of a call, as another process on the host can reach it: the IPC handle of the
/// whole allocation holding it (cudaIpcGetMemHandle takes an allocation's base), the
/// allocation's id, base (in the exporter's address space) and size, and where the buffer sits
/// in it. `bytes` 0: the rank uses no such buffer in this call.
struct BufferRef {
  IpcHandle handle;
  std::uint64_t alloc_id = 0;
  std::uint64_t base = 0;
  std::uint64_t alloc_bytes = 0;
  std::uint64_t offset = 0;
  std::uint64_t bytes = 0;
};

/// A call on the peer-read route as one rank made it.
struct PeerCard {
  static constexpr std::uint8_t kUnexportable = 1;  // a buffer could not be shared: FIFO route

  std::uint64_t ticket = 0;  // the route's call number (1, 2, ...), alike on every rank
  std::uint64_t seq = 0;     // the communicator's call number
  std::uint64_t count = 0;
  std::int32_t root = -1;
  std::uint8_t kind = 0;   // coll::CollKind
  std::uint8_t dtype = 0;  // DataType
  std::uint8_t op = 0;     // RedOp
  std::uint8_t flags = 0;
  BufferRef send;
  BufferRef recv;
};
static_assert(std::is_trivially_copyable_v<PeerCard>);

}  // namespace loom::device
