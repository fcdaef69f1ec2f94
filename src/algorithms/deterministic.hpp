// Deterministic (bitwise reproducible) reductions, pure functions like the rings.
//
// Every element is reduced in one fixed order, rank 0 first, then 1, ..., n-1, whatever the
// algorithm, chunk size or topology: rank j owns slice j of the data and receives every other
// rank's contribution to it directly (n-1 independent messages, all in flight at once), then
// folds them in rank order. This reduce-scatter moves exactly the bytes of a ring
// reduce-scatter ((n-1)/n of the buffer in and out per rank). Allreduce follows it with a ring
// allgather (pure data movement), reduce with a gather of the slices at the root.
//
// Cost, honestly: the same bytes as the ring, but each rank talks to all n-1 peers (n-1
// connections, and n-1 receive slots per chunk in flight), the fold of a slice cannot start
// before rank 0's part has arrived, and across hosts all ranks of a host send through its NIC at
// once (per_host x (n - per_host) / n of the buffer per host instead of the ring's (n-1)/n).
#pragma once

#include "algorithms/plan.hpp"
#include "algorithms/ring.hpp"

namespace loom::algo {

Plan deterministic_allreduce(const RingParams& p);
Plan deterministic_reduce_scatter(const RingParams& p);
Plan deterministic_reduce(const RingParams& p);

}  // namespace loom::algo
