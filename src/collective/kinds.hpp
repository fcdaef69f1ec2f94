// The library's vocabulary, each word defined once: which collective a call is, which algorithm
// runs it, and where a buffer lives. Every layer (transports, algorithms, the executor, the
// selector, the communicator) names these; none defines its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "loom/options.hpp"

namespace loom::coll {

/// The collective a call is. The five data collectives come first, in this order (the selector
/// indexes its tables with them); the value travels in every message header (coll::Tag).
enum class CollKind : std::uint8_t {
  AllReduce = 0,
  AllGather,
  ReduceScatter,
  Broadcast,
  Reduce,
  Barrier,
  AllToAll,   // count elements per peer block
  AllToAllV,  // per-peer counts and displacements (OpDesc::v)
  Gather,     // count elements per rank, to the root
  Scatter,    // count elements per rank, from the root
  P2P,        // send, recv, sendrecv: between two ranks, outside the collective order
};
/// The data collectives: AllReduce .. Reduce (Barrier moves no data).
inline constexpr int kNumDataColls = 5;
/// True for the kinds with one schedule (no algorithm to choose): the barrier, all-to-all(v),
/// gather, scatter and point-to-point calls.
constexpr bool fixed_schedule(CollKind k) {
  return k == CollKind::Barrier || k == CollKind::AllToAll || k == CollKind::AllToAllV ||
         k == CollKind::Gather || k == CollKind::Scatter || k == CollKind::P2P;
}
/// "allreduce", "allgather", "reduce_scatter", "broadcast", "reduce", "barrier", "alltoall",
/// "alltoallv", "gather", "scatter", "send/recv".
std::string_view to_string(CollKind k);

/// A schedule family. The public loom::Algorithm (a call's hint) names the ones a caller may
/// force; Deterministic is chosen by LOOM_DETERMINISTIC, never by a hint. The selector's
/// catalog (selector/catalog.hpp) holds one row per value.
enum class Algo : std::uint8_t { Ring, Tree, Deterministic, Rd, Hier, Bruck };
inline constexpr std::size_t kNumAlgos = 6;
/// "ring", "tree", "deterministic", "rd", "hier", "bruck".
std::string_view to_string(Algo a);
/// A call's hint: the algorithm it forces, or nullopt for Algorithm::Auto.
std::optional<Algo> forced_by(Algorithm hint);
/// The hint that forces `a` (nullopt: none does, Deterministic).
std::optional<Algorithm> hint_for(Algo a);

/// Where a buffer lives (cudaPointerGetAttributes' two answers; managed memory is Device).
enum class MemoryKind : std::uint8_t { Host, Device };
/// "host", "device".
std::string_view to_string(MemoryKind k) noexcept;

}  // namespace loom::coll
