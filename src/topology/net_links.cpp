#include "topology/net_links.hpp"

#include <ifaddrs.h>
#include <linux/netlink.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

namespace loom::topo {
namespace {

// The link speed sysfs reports, in GB/s (0: unknown; virtual NICs often say -1).
double net_sysfs_speed_gbps(const std::string& ifname) {
  std::ifstream in("/sys/class/net/" + ifname + "/speed");
  long mbit = 0;
  if (!(in >> mbit) || mbit <= 0) return 0;
  return static_cast<double>(mbit) * 1e6 / 8 / 1e9;
}

bool net_is_bridge(const std::string& ifname) {
  std::error_code ec;
  return std::filesystem::exists("/sys/class/net/" + ifname + "/bridge", ec);
}

std::set<std::string> net_split_names(std::string_view list) {
  std::set<std::string> out;
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    if (!item.empty()) out.emplace(item);
  }
  return out;
}

// A netlink socket to the kernel's routing layer, closed at scope exit; fd < 0 when it failed.
struct RouteSocket {
  int fd = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  RouteSocket() {
    if (fd < 0) return;
    timeval tv{1, 0};  // the kernel answers a dump at once; never wait past a second
    (void)::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  RouteSocket(const RouteSocket&) = delete;
  RouteSocket& operator=(const RouteSocket&) = delete;
  ~RouteSocket() {
    if (fd >= 0) ::close(fd);
  }
};

// Scheduler ticks per microsecond, as tc computes them from /proc/net/psched.
double psched_ticks_per_us() {
  std::ifstream in("/proc/net/psched");
  unsigned t2us = 0, us2t = 0, clock_res = 0;
  if (!(in >> std::hex >> t2us >> us2t >> clock_res) || us2t == 0) return 15.625;
  if (clock_res == 1000000000) t2us = us2t;
  return static_cast<double>(t2us) / us2t * clock_res / 1e6;
}

struct Tbf {
  std::uint64_t rate = 0;    // bytes/s
  std::uint32_t buffer = 0;  // the bucket, in scheduler ticks at `rate`
};

// The rate and bucket of a tbf qdisc's TCA_OPTIONS (rate 0 when absent).
Tbf tbf_params(const rtattr* options) {
  Tbf tbf;
  std::uint64_t& rate = tbf.rate;
  int len = static_cast<int>(RTA_PAYLOAD(options));
  for (auto* a = static_cast<const rtattr*>(RTA_DATA(options)); RTA_OK(a, len);
       a = RTA_NEXT(a, len)) {
    if (a->rta_type == TCA_TBF_PARMS && RTA_PAYLOAD(a) >= sizeof(tc_tbf_qopt)) {
      tc_tbf_qopt q{};
      std::memcpy(&q, RTA_DATA(a), sizeof q);
      rate = std::max<std::uint64_t>(rate, q.rate.rate);
      tbf.buffer = q.buffer;
    } else if (a->rta_type == TCA_TBF_RATE64 && RTA_PAYLOAD(a) >= sizeof(std::uint64_t)) {
      std::uint64_t r64 = 0;
      std::memcpy(&r64, RTA_DATA(a), sizeof r64);
      rate = std::max(rate, r64);
    }
  }
  return tbf;
}

// The root tbf of `ifindex` in one qdisc message, rate 0 when it is another qdisc.
Tbf root_tbf(const nlmsghdr* h, int ifindex) {
  const auto* tc = static_cast<const tcmsg*>(NLMSG_DATA(h));
  if (tc->tcm_ifindex != ifindex || tc->tcm_parent != TC_H_ROOT) return {};
  int len = static_cast<int>(h->nlmsg_len - NLMSG_LENGTH(sizeof(tcmsg)));
  bool tbf = false;
  const rtattr* options = nullptr;
  for (const auto* a = reinterpret_cast<const rtattr*>(  // NOLINT: the netlink wire layout
           reinterpret_cast<const char*>(tc) + NLMSG_ALIGN(sizeof(tcmsg)));
       RTA_OK(a, len); a = RTA_NEXT(a, len)) {
    if (a->rta_type == TCA_KIND)
      tbf = std::strncmp(static_cast<const char*>(RTA_DATA(a)), "tbf", RTA_PAYLOAD(a)) == 0;
    if (a->rta_type == TCA_OPTIONS) options = a;
  }
  return tbf && options != nullptr ? tbf_params(options) : Tbf{};
}

}  // namespace

double tc_root_rate_gbps(int ifindex) {
  return tc_root_bucket(ifindex).gbps;
}

TcBucket tc_root_bucket(int ifindex) {
  RouteSocket s;
  if (s.fd < 0) return {};
  struct {
    nlmsghdr h;
    tcmsg tc;
  } req{};
  req.h.nlmsg_len = NLMSG_LENGTH(sizeof(tcmsg));
  req.h.nlmsg_type = RTM_GETQDISC;
  req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  req.tc.tcm_family = AF_UNSPEC;
  if (::send(s.fd, &req, req.h.nlmsg_len, 0) < 0) return {};
  std::array<char, 32768> buf{};
  Tbf root;
  for (int replies = 0; replies < 1024; ++replies) {  // a dump ends with NLMSG_DONE
    const ssize_t n = ::recv(s.fd, buf.data(), buf.size(), 0);
    if (n <= 0) return {};
    int len = static_cast<int>(n);
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf.data()); NLMSG_OK(h, len);  // NOLINT
         h = NLMSG_NEXT(h, len)) {
      if (h->nlmsg_type == NLMSG_DONE) {
        const auto rate = static_cast<double>(root.rate);
        // tc stores the bucket as the time it takes to drain at the rate, in ticks.
        return {rate / 1e9, rate * root.buffer / psched_ticks_per_us() / 1e6};
      }
      if (h->nlmsg_type == NLMSG_ERROR) return {};
      if (h->nlmsg_type == RTM_NEWQDISC) {
        const Tbf t = root_tbf(h, ifindex);
        if (t.rate > root.rate) root = t;
      }
    }
  }
  return {};
}

std::vector<NetLink> local_net_links(std::string_view ifnames) {
  const std::set<std::string> wanted = net_split_names(ifnames);
  std::set<std::string> names;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return {};
  for (const ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_name == nullptr) continue;
    if (a->ifa_addr->sa_family != AF_INET && a->ifa_addr->sa_family != AF_INET6) continue;
    if ((a->ifa_flags & IFF_LOOPBACK) != 0 || (a->ifa_flags & IFF_UP) == 0) continue;
    names.emplace(a->ifa_name);
  }
  ::freeifaddrs(list);
  std::vector<NetLink> out;
  for (const std::string& name : names) {
    if (net_is_bridge(name) || (!wanted.empty() && !wanted.contains(name))) continue;
    NetLink l{name, net_sysfs_speed_gbps(name)};
    const auto index = static_cast<int>(::if_nametoindex(name.c_str()));
    const TcBucket bucket = index > 0 ? tc_root_bucket(index) : TcBucket{};
    const double capped = bucket.gbps;
    if (capped > 0) l.gbps = l.gbps > 0 ? std::min(l.gbps, capped) : capped;
    if (capped > 0) l.burst_bytes = bucket.burst_bytes;
    out.push_back(std::move(l));
  }
  return out;
}

NetRate summarize(const std::vector<NetLink>& links) {
  NetRate r;
  for (const NetLink& l : links) {
    if (l.gbps <= 0) continue;
    r.link_gbps = r.links == 0 ? l.gbps : std::min(r.link_gbps, l.gbps);
    if (l.burst_bytes > 0)
      r.burst_bytes = r.burst_bytes > 0 ? std::min(r.burst_bytes, l.burst_bytes) : l.burst_bytes;
    ++r.links;
  }
  return r;
}

}  // namespace loom::topo
