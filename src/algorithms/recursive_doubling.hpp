// Recursive doubling allreduce (pure function): the latency schedule for small buffers.
//
// With p the largest power of two <= n, p ranks exchange their whole buffer with their partner
// at distance 2^k (in the numbering of those p) in round k = 0..log2(p)-1 and combine it:
// log2(p) dependent messages instead of the ring's 2(n-1). Of the first 2(n - p) ranks, each odd
// one first folds its buffer into its even neighbour and gets the result back at the end (two
// more messages for it): neighbours share a host, and a CPU when bound in blocks, so the folds
// stay local and the p ranks of the rounds spread over the CPUs. Every combination puts the
// lower rank's partial result on the left, so every rank computes the same expression: the
// results are bitwise identical on all ranks (as with the ring), whatever the dtype and op.
// Each round reduces into the scratch slot it received into, and only the last round writes the
// receive buffer: no round waits for its own send to complete (a single-copy or rendezvous send
// completes only once the partner has read it). Each rank sends and reduces the whole buffer
// log2(p) times, so the selector uses it only below LOOM_TUNE_RD_MAX_BYTES.
#pragma once

#include "algorithms/plan.hpp"
#include "algorithms/ring.hpp"

namespace loom::algo {

/// Uses p.rank, p.nranks, p.count, p.elem_size and p.in_place (ring order, chunking unused).
Plan rd_allreduce(const RingParams& p);

}  // namespace loom::algo
