#include "algorithms/recursive_doubling.hpp"

#include <bit>

namespace loom::algo {

Plan rd_allreduce(const RingParams& p) {
  Plan plan;
  plan.algorithm = "rd";
  const int n = p.nranks;
  const int me = p.rank;
  const std::size_t bytes = p.count * p.elem_size;
  const Span send{BufId::Send, 0, bytes};
  const Span recv{BufId::Recv, 0, bytes};
  const int pow2 = static_cast<int>(std::bit_floor(static_cast<unsigned>(n)));
  const int extras = n - pow2;
  auto slot = [&](int k) {
    return Span{BufId::Scratch, static_cast<std::size_t>(k) * bytes, bytes};
  };

  if (me >= pow2) {  // fold into rank me - pow2, then receive the result from it
    const int partner = me - pow2;
    const std::uint32_t s = plan.add(send_to(partner, send));
    // In place the result lands where the input is still being sent from.
    plan.add(recv_from(partner, recv), {p.in_place ? s : kNoStep});
    return plan;
  }
  Span cur = send;  // this rank's partial result
  std::uint32_t prev = kNoStep;
  int used = 0;
  if (me < extras) {  // take in rank me + pow2's buffer first (it is the higher rank)
    const std::uint32_t r = plan.add(recv_from(me + pow2, slot(used)));
    prev = plan.add(reduce_into(recv, cur, slot(used)), {r});
    cur = recv;
    ++used;
  }
  for (int mask = 1; mask < pow2; mask <<= 1) {
    const int partner = me ^ mask;
    const std::uint32_t s = plan.add(send_to(partner, cur), {prev});
    const std::uint32_t r = plan.add(recv_from(partner, slot(used)));
    const bool lower = me < partner;
    // The result overwrites the receive buffer, which may be what is being sent: after the send.
    prev = plan.add(reduce_into(recv, lower ? cur : slot(used), lower ? slot(used) : cur),
                    {r, s, prev});
    cur = recv;
    ++used;
  }
  if (prev == kNoStep && !p.in_place) prev = plan.add(copy_into(recv, send));  // a single rank
  if (me < extras) plan.add(send_to(me + pow2, recv), {prev});
  plan.scratch_bytes = static_cast<std::size_t>(used) * bytes;
  return plan;
}

}  // namespace loom::algo
