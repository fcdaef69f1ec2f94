// Step-level replay of loom's real plans on a modelled cluster (loom-sim --replay): every rank's
// plan is built by the same functions the library runs, then executed in simulated time. A
// message costs its link's latency plus bytes / bandwidth; a rank's outgoing messages share its
// port, the messages leaving a host share the host's NIC, and a rank's reductions run one at a
// time at the reduction bandwidth. Per (peer, direction), messages go in plan order, as in the
// executor. Exact for the schedule's dependencies; blind to transport details and noise.
#pragma once

#include <cstddef>

#include "common/status.hpp"
#include "selector/shape.hpp"
#include "selector/tuning.hpp"

namespace loom::sim {

using select::Algo;
using select::Coll;
using select::Pipeline;
using select::Shape;
using select::Tuning;

struct ReplayResult {
  double us = 0;          // when the last rank finishes
  std::size_t steps = 0;  // over all ranks
};

/// Ranks are placed host by host (rank r on host r / per_host). Fails (InvalidArgument) when the
/// plans would exceed `max_steps` in total.
Result<ReplayResult> replay(Coll coll, Algo algo, std::size_t bytes, const Shape& shape,
                            const Tuning& t, const Pipeline& p,
                            std::size_t max_steps = std::size_t{20} << 20);

}  // namespace loom::sim
