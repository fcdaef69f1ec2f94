// Several NICs per host for the tcp transport ("rails"). LOOM_SOCKET_IFNAME=eth0,eth1 gives a
// rank one listener per interface: the first is its data address (in its card as before), the
// others travel in its card as rails. A connecting rank spreads its sockets to a peer over the
// rails, rail by rail (socket s leaves from local rail s mod L to the peer's rail s mod P), with
// at least one socket per rail; since striped parts and whole messages go to consecutive sockets
// round-robin, large messages use every NIC at once and small ones alternate between them.
#pragma once

#include <vector>

#include "common/socket.hpp"
#include "common/status.hpp"
#include "config/config.hpp"

namespace loom::transport::tcp {

/// At most this many interfaces in LOOM_SOCKET_IFNAME (so every rail gets 2 of the 16 sockets).
inline constexpr int kMaxRails = 8;

/// The bind addresses (port 0) of LOOM_SOCKET_IFNAME's second and later interfaces: empty for
/// one interface or none. InvalidUsage naming the interface when one is missing, has no address,
/// repeats another's address, or the list names more than kMaxRails.
Result<std::vector<net::SocketAddress>> extra_rails(const config::Config& cfg);

/// One socket's path: from this rank's rail `local` to the peer's rail `remote` (0: the
/// primary address).
struct RailPair {
  int local = 0;
  int remote = 0;
  bool operator==(const RailPair&) const = default;
};

/// The socket count for a connection over `rails` rails (the larger of the two ranks' counts):
/// `sockets`, raised to at least one per rail and rounded up to a multiple of the rails so that
/// every rail carries as many sockets, at most `max_sockets`.
int sockets_for_rails(int sockets, int rails, int max_sockets);

/// Socket `socket`'s rails, with `local_rails` rails here and `peer_rails` at the peer.
RailPair rail_of(int socket, int local_rails, int peer_rails);
/// Each of `sockets` sockets' rails (rail_of, in order).
std::vector<RailPair> rail_plan(int sockets, int local_rails, int peer_rails);

}  // namespace loom::transport::tcp
