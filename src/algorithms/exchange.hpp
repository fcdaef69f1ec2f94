// Plans that move data without reducing it between every pair or between a root and the
// others: all-to-all(v) by pairwise exchange, and flat gather and scatter (pure functions).
//
// Every pair exchanges exactly one message per call, also when it carries zero bytes: the
// receiver then learns the sender's size, so counts that disagree between two ranks fail as a
// size mismatch naming both instead of leaving a receive that never completes.
#pragma once

#include <cstddef>
#include <vector>

#include "algorithms/plan.hpp"

namespace loom::algo {

/// One rank's all-to-all-v layout, in bytes: block p of the send buffer (send_offsets[p],
/// send_bytes[p]) goes to rank p, block p of the receive buffer comes from rank p. Each vector
/// holds `nranks` entries. `in_place`: the receive buffer is also the send buffer (MPI_IN_PLACE
/// style: the send layout must equal the receive layout); the plan stages the outgoing blocks
/// through scratch.
struct ExchangeLayout {
  int rank = 0;
  int nranks = 1;
  std::vector<std::size_t> send_offsets, send_bytes;
  std::vector<std::size_t> recv_offsets, recv_bytes;
  bool in_place = false;
};

/// The layout of a plain all-to-all: `block_bytes` per peer, blocks in rank order.
ExchangeLayout uniform_layout(int rank, int nranks, std::size_t block_bytes, bool in_place);

/// Pairwise exchange: in round k (1..n-1) rank r sends its block for r+k and receives the block
/// of r-k (mod n), so every rank talks to one partner per direction at a time and the rounds
/// keep links evenly loaded; its own block is a local copy. Rounds are not serialised: the
/// executor's per-peer window lets them overlap.
Plan pairwise_alltoall(const ExchangeLayout& layout);

/// Gather to `root`: every rank's `block_bytes` land at offset rank x block_bytes of the root's
/// receive buffer (the root copies its own block unless in place). Non-roots only send.
Plan flat_gather(int rank, int nranks, int root, std::size_t block_bytes, bool in_place);

/// Scatter from `root`: block p (offset p x block_bytes of the root's send buffer) goes to rank
/// p's receive buffer; the root copies its own block unless in place. Non-roots only receive.
Plan flat_scatter(int rank, int nranks, int root, std::size_t block_bytes, bool in_place);

}  // namespace loom::algo
