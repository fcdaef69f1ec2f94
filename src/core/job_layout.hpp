// What a rank learns about the job at init, through one exchange over the bootstrap store:
// every rank's topology, data address (and further rails) and transport allow list; from those,
// the transport for each peer and the ring order.
#pragma once

#include <string>
#include <vector>

#include "bootstrap/store.hpp"
#include "common/socket.hpp"
#include "config/config.hpp"
#include "core/transport_choice.hpp"
#include "topology/topology.hpp"

namespace loom::detail {

struct JobLayout {
  topo::Topology topology;
  std::vector<net::SocketAddress> tcp_addresses;  // by rank
  /// By rank, each rank's further data addresses (one per extra rail); empty when no rank has any.
  std::vector<std::vector<net::SocketAddress>> rail_addresses;
  std::vector<TransportKind> transport_of;  // by peer
  std::vector<int> ring;                    // ring order
  bool any_ofi = false;                     // some pair of ranks talks over ofi
  // Every rank reaches all its peers through one transport kind, the same on every rank (what
  // the shared-memory arena needs; every rank computes it alike from the cards).
  bool one_kind = false;
  [[nodiscard]] int ranks_on_my_host(int rank) const;
};

/// Publishes this rank's card and assembles the layout from every rank's. LOOM_TOPO_FILE
/// replaces the probed topology; rank 0 writes the result to LOOM_TOPO_DUMP_FILE.
Result<JobLayout> exchange_layout(bootstrap::Store& store, const std::string& prefix, int rank,
                                  int nranks, const config::Config& cfg,
                                  const net::SocketAddress& tcp_address,
                                  const std::vector<net::SocketAddress>& rails, Deadline deadline,
                                  const bootstrap::WaitCheck& check = {});

/// The closing rendezvous' barrier (see bootstrap::store_barrier_fail for a rank that will not
/// reach it).
std::string rendezvous_name(const std::string& prefix);

/// Ends the rendezvous: a barrier of every rank (2 store requests per rank).
Status finish_rendezvous(bootstrap::Store& store, const std::string& prefix, int rank, int nranks,
                         Deadline deadline, const bootstrap::WaitCheck& check = {});

}  // namespace loom::detail
