#include "transports/tcp/tcp_rails.hpp"

#include <algorithm>
#include <string>

#include "common/strings.hpp"

namespace loom::transport::tcp {

Result<std::vector<net::SocketAddress>> extra_rails(const config::Config& cfg) {
  const std::string list = cfg.get_string("LOOM_SOCKET_IFNAME");
  const std::vector<std::string_view> names = comma_tokens(list);
  if (names.size() > static_cast<std::size_t>(kMaxRails))
    return make_error(ErrorCode::InvalidUsage,
                      "LOOM_SOCKET_IFNAME={} names {} interfaces; at most {} rails are supported",
                      list, names.size(), kMaxRails);
  std::vector<net::SocketAddress> all;
  for (std::string_view name : names) {
    auto a = net::interface_address(name);
    if (!a.is_ok())
      return Status(ErrorCode::InvalidUsage, a.status().message())
          .with_context(fmt::format("LOOM_SOCKET_IFNAME={}", list));
    for (std::size_t i = 0; i < all.size(); ++i)
      if (net::same_endpoint(all[i], *a))  // both with port 0
        return make_error(ErrorCode::InvalidUsage,
                          "LOOM_SOCKET_IFNAME={}: interfaces '{}' and '{}' have the same address "
                          "{}; each rail needs its own",
                          list, names[i], name, a->to_string());
    all.push_back(*a);
  }
  if (all.size() <= 1) return std::vector<net::SocketAddress>{};
  return std::vector<net::SocketAddress>(all.begin() + 1, all.end());
}

int sockets_for_rails(int sockets, int rails, int max_sockets) {
  if (rails <= 1) return std::min(sockets, max_sockets);
  const int per_rail = std::max(1, (sockets + rails - 1) / rails);
  return std::min(per_rail * rails, std::max(max_sockets / rails, 1) * rails);
}

RailPair rail_of(int socket, int local_rails, int peer_rails) {
  return {socket % std::max(1, local_rails), socket % std::max(1, peer_rails)};
}

std::vector<RailPair> rail_plan(int sockets, int local_rails, int peer_rails) {
  std::vector<RailPair> out;
  out.reserve(static_cast<std::size_t>(std::max(0, sockets)));
  for (int s = 0; s < sockets; ++s) out.push_back(rail_of(s, local_rails, peer_rails));
  return out;
}

}  // namespace loom::transport::tcp
