#include "algorithms/recursive_doubling.hpp"

#include <bit>

namespace loom::algo {

namespace {

// With p the largest power of two <= n and e = n - p ranks to fold, ranks 2i + 1 (i < e) fold
// into their neighbour 2i; the p ranks left are numbered v = 0..p-1 in rank order.
struct Fold {
  int pow2 = 1;
  int extras = 0;
  [[nodiscard]] bool folded(int rank) const { return rank < 2 * extras && rank % 2 == 1; }
  [[nodiscard]] int virtual_of(int rank) const {
    return rank < 2 * extras ? rank / 2 : rank - extras;
  }
  [[nodiscard]] int rank_of(int v) const { return v < extras ? 2 * v : v + extras; }
  // The rank folded into `rank`, or -1.
  [[nodiscard]] int guest_of(int rank) const {
    return rank < 2 * extras && rank % 2 == 0 ? rank + 1 : -1;
  }
};

}  // namespace

Plan rd_allreduce(const RingParams& p) {
  Plan plan;
  plan.algorithm = "rd";
  const int me = p.rank;
  const std::size_t bytes = p.count * p.elem_size;
  const Span send{BufId::Send, 0, bytes};
  const Span recv{BufId::Recv, 0, bytes};
  Fold fold;
  fold.pow2 = static_cast<int>(std::bit_floor(static_cast<unsigned>(p.nranks)));
  fold.extras = p.nranks - fold.pow2;
  auto slot = [&](int k) {
    return Span{BufId::Scratch, static_cast<std::size_t>(k) * bytes, bytes};
  };

  if (fold.folded(me)) {  // fold into the neighbour below, then receive the result from it
    const int partner = me - 1;
    const std::uint32_t s = plan.add(send_to(partner, send));
    // In place the result lands where the input is still being sent from.
    plan.add(recv_from(partner, recv), {p.in_place ? s : kNoStep});
    return plan;
  }
  // Each round reduces into the scratch slot it received into, so no round waits for its own
  // send to complete before reducing (a single-copy or rendezvous send completes only once the
  // partner has read it); only the last writes the receive buffer, after every send of it.
  Span cur = send;  // this rank's partial result
  std::uint32_t prev = kNoStep;
  // In place, round 0 sends the input, which is the receive buffer.
  std::uint32_t send_of_recv = kNoStep;
  int used = 0;
  const int guest = fold.guest_of(me);
  if (guest >= 0) {  // take in the folded neighbour's buffer first (it is the higher rank)
    const std::uint32_t r = plan.add(recv_from(guest, slot(used)));
    prev = plan.add(reduce_into(slot(used), cur, slot(used)), {r});
    cur = slot(used);
    ++used;
  }
  const int v = fold.virtual_of(me);
  for (int mask = 1; mask < fold.pow2; mask <<= 1) {
    const int partner = fold.rank_of(v ^ mask);
    const std::uint32_t s = plan.add(send_to(partner, cur), {prev});
    if (p.in_place && cur.buf == BufId::Send) send_of_recv = s;
    const std::uint32_t r = plan.add(recv_from(partner, slot(used)));
    const bool lower = me < partner;
    const bool last = mask << 1 >= fold.pow2;
    const Span dst = last ? recv : slot(used);
    const Step reduce = reduce_into(dst, lower ? cur : slot(used), lower ? slot(used) : cur);
    prev = plan.add(reduce, {r, prev, last ? send_of_recv : kNoStep});
    cur = dst;
    ++used;
  }
  if (prev == kNoStep && !p.in_place) prev = plan.add(copy_into(recv, send));  // a single rank
  if (guest >= 0) plan.add(send_to(guest, recv), {prev});
  plan.scratch_bytes = static_cast<std::size_t>(used) * bytes;
  return plan;
}

}  // namespace loom::algo
