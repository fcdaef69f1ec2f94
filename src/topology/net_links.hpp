// The rate of this host's network links, for the cost model: every interface that carries an
// address (not loopback, not a bridge; LOOM_SOCKET_IFNAME's when set) at the lower of its link
// speed (/sys/class/net/IF/speed) and the rate of a token bucket (tc tbf) at its root, read
// through netlink, with the bucket's size (what leaves at the link's own speed after a pause).
// Anything the system does not say is left unknown.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "config/config.hpp"

namespace loom::topo {

/// One network interface and its rate in GB/s (0: unknown).
struct NetLink {
  std::string name;
  double gbps = 0;
  double burst_bytes = 0;  // the root token bucket's size (0: no bucket)
};

/// The interfaces loom's traffic between hosts may use, probed now (in this process's network
/// namespace). `ifnames`: a comma list (LOOM_SOCKET_IFNAME) that restricts them; empty: all.
std::vector<NetLink> local_net_links(std::string_view ifnames);

/// The root token bucket (tc tbf) of interface `ifindex`: its rate in GB/s and its size in bytes
/// (both 0: none, or unreadable).
struct TcBucket {
  double gbps = 0;
  double burst_bytes = 0;
};
TcBucket tc_root_bucket(int ifindex);
/// tc_root_bucket(ifindex).gbps.
double tc_root_rate_gbps(int ifindex);

/// What a host's links give the cost model: the rate of one of them (the slowest that is known)
/// and how many there are; {0, 0} when no rate is known.
struct NetRate {
  double link_gbps = 0;
  int links = 0;
  double burst_bytes = 0;  // the smallest token bucket among them (0: none)
};
NetRate summarize(const std::vector<NetLink>& links);

}  // namespace loom::topo
