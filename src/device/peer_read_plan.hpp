// What the peer-read route (peer_read.hpp) runs for one call on one rank: at most one launch of
// the multi-buffer kernel (device::MultiReduce), reading every rank's buffers in place. Pure
// functions of the call, the rank and where every rank's buffers are reachable from here, so
// that every rank derives the same split and the tests can check it without a device.
//
//   allreduce       rank r reduces block r of every input (rank order) and writes the result
//                   into block r of every output: one read and one write of each byte
//   reduce_scatter  rank r reduces chunk r of every input into its output
//   reduce          rank r reduces block r of every input into block r of the root's output
//   allgather       rank r copies its input into chunk r of every output
//   broadcast       every rank copies the root's input into its output (the root: only when
//                   out of place)
// Blocks are whole 64-byte units, the last ones shorter or empty (a rank with an empty block
// launches nothing). Avg divides in the same launch, after the sum, as the divide kernel would.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "collective/op.hpp"
#include "device/device.hpp"

namespace loom::device {

/// Whether the route serves `op`'s kind (and operator: PreMulSum with a scalar has a scaling
/// step it lacks).
bool peer_read_serves(const coll::OpDesc& op);

/// Elements [begin, end) of block `k` of `count` elements of `elem` bytes over `nranks`.
struct Block {
  std::size_t begin = 0;
  std::size_t end = 0;
  [[nodiscard]] std::size_t size() const { return end - begin; }
};
Block peer_read_block(std::size_t count, std::size_t elem, int k, int nranks);

/// Every rank's send and receive buffer as this rank reaches them (its own, or a peer's
/// mapped here); null where a rank uses none.
struct RankBuffers {
  std::vector<const std::uint8_t*> send;
  std::vector<std::uint8_t*> recv;
};

/// This rank's launch for `op` (dtype, op, sources, destinations, count, Avg's divisor);
/// nullopt when it has nothing to run. Copies move bytes (Uint8).
std::optional<MultiReduce> peer_read_launch(const coll::OpDesc& op, int rank, int nranks,
                                            const RankBuffers& b);

}  // namespace loom::device
