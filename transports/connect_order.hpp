// The order in which two point-to-point transports (tcp, ofi) open connections to a set of
// peers without deadlock: connect to higher ranks first, then accept from lower ones, each in
// rank order, skipping peers already connected.
#pragma once

#include <algorithm>
#include <vector>

#include "common/deadline.hpp"
#include "common/status.hpp"

namespace loom::transport {

/// `connected(p)` tells whether peer p already has a connection; `connect_to(p, deadline)` and
/// `accept_from(p, deadline)` open one and return a Status.
template <class Connected, class ConnectTo, class AcceptFrom>
Status connect_in_rank_order(int rank, std::vector<int> peers, Deadline deadline,
                             Connected connected, ConnectTo connect_to, AcceptFrom accept_from) {
  std::sort(peers.begin(), peers.end());
  for (int p : peers)
    if (p > rank && !connected(p)) LOOM_RETURN_IF_ERROR(connect_to(p, deadline));
  for (int p : peers)
    if (p < rank && !connected(p)) LOOM_RETURN_IF_ERROR(accept_from(p, deadline));
  return Status::ok();
}

}  // namespace loom::transport
