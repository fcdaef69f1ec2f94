#include "algorithms/exchange.hpp"

namespace loom::algo {
namespace {

std::size_t at(const std::vector<std::size_t>& v, int i) {
  return v[static_cast<std::size_t>(i)];
}

int mod(int a, int n) {
  return ((a % n) + n) % n;
}

}  // namespace

ExchangeLayout uniform_layout(int rank, int nranks, std::size_t block_bytes, bool in_place) {
  ExchangeLayout l;
  l.rank = rank;
  l.nranks = nranks;
  l.in_place = in_place;
  const auto n = static_cast<std::size_t>(nranks);
  l.send_bytes.assign(n, block_bytes);
  l.recv_bytes.assign(n, block_bytes);
  l.send_offsets.resize(n);
  for (std::size_t p = 0; p < n; ++p) l.send_offsets[p] = p * block_bytes;
  l.recv_offsets = l.send_offsets;
  return l;
}

Plan pairwise_alltoall(const ExchangeLayout& l) {
  Plan plan;
  plan.algorithm = "pairwise";
  const int r = l.rank, n = l.nranks;
  // In place, every outgoing block is first copied to scratch (packed), since incoming blocks
  // overwrite the buffer; each send depends on that copy.
  std::vector<std::size_t> staged(static_cast<std::size_t>(n), 0);
  std::uint32_t staging = kNoStep;
  if (l.in_place && n > 1) {
    std::size_t total = 0;
    for (int p = 0; p < n; ++p) {
      staged[static_cast<std::size_t>(p)] = total;
      if (p != r) total += at(l.send_bytes, p);
    }
    plan.scratch_bytes = total;
    for (int p = 0; p < n; ++p) {
      if (p == r || at(l.send_bytes, p) == 0) continue;
      staging = plan.add(
          copy_into({BufId::Scratch, staged[static_cast<std::size_t>(p)], at(l.send_bytes, p)},
                    {BufId::Recv, at(l.send_offsets, p), at(l.send_bytes, p)}),
          {staging});
    }
  }
  if (!l.in_place && at(l.recv_bytes, r) > 0)
    plan.add(copy_into({BufId::Recv, at(l.recv_offsets, r), at(l.recv_bytes, r)},
                       {BufId::Send, at(l.send_offsets, r), at(l.send_bytes, r)}));
  for (int k = 1; k < n; ++k) {
    const int to = mod(r + k, n), from = mod(r - k, n);
    const Span src = l.in_place ? Span{BufId::Scratch, staged[static_cast<std::size_t>(to)],
                                       at(l.send_bytes, to)}
                                : Span{BufId::Send, at(l.send_offsets, to), at(l.send_bytes, to)};
    plan.add(send_to(to, src), {staging});
    // In place, a block may only be overwritten once every copy out of the buffer is done.
    plan.add(recv_from(from, {BufId::Recv, at(l.recv_offsets, from), at(l.recv_bytes, from)}),
             {staging});
  }
  return plan;
}

namespace {

// Gather (toward the root) and scatter (from it) are mirror images: the root's n-block buffer
// is its receive buffer for a gather, its send buffer for a scatter.
Plan flat_rooted(int rank, int nranks, int root, std::size_t block_bytes, bool in_place,
                 bool gather) {
  Plan plan;
  plan.algorithm = "flat";
  const BufId many = gather ? BufId::Recv : BufId::Send;
  const BufId one = gather ? BufId::Send : BufId::Recv;
  if (rank != root) {
    plan.add(gather ? send_to(root, {one, 0, block_bytes})
                    : recv_from(root, {one, 0, block_bytes}));
    return plan;
  }
  const Span own_block{many, static_cast<std::size_t>(rank) * block_bytes, block_bytes};
  const Span own{one, 0, block_bytes};
  if (!in_place && block_bytes > 0)
    plan.add(gather ? copy_into(own_block, own) : copy_into(own, own_block));
  for (int k = 1; k < nranks; ++k) {
    const int peer = mod(rank + k, nranks);
    const Span block{many, static_cast<std::size_t>(peer) * block_bytes, block_bytes};
    plan.add(gather ? recv_from(peer, block) : send_to(peer, block));
  }
  return plan;
}

}  // namespace

Plan flat_gather(int rank, int nranks, int root, std::size_t block_bytes, bool in_place) {
  return flat_rooted(rank, nranks, root, block_bytes, in_place, true);
}

Plan flat_scatter(int rank, int nranks, int root, std::size_t block_bytes, bool in_place) {
  return flat_rooted(rank, nranks, root, block_bytes, in_place, false);
}

}  // namespace loom::algo
