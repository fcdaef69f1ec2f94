#include "transports/tcp/tcp_transport.hpp"

#include <sched.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "log/log.hpp"
#include "transports/connect_order.hpp"
#include "transports/tcp/tcp_rails.hpp"
#include "transports/tcp/wire.hpp"

namespace loom::transport::tcp {

namespace {

int cpus_available() {
  cpu_set_t set;
  CPU_ZERO(&set);
  return sched_getaffinity(0, sizeof set, &set) == 0 ? std::max(1, CPU_COUNT(&set)) : 1;
}

std::size_t sysctl_size(const char* path) {
  std::ifstream in(path);
  std::size_t v = 0;
  in >> v;
  return in ? v : 0;
}

// SO_xBUFFORCE (needs CAP_NET_ADMIN), else SO_xBUF when the request fits under the kernel's cap;
// false when the buffer is left to autotuning.
bool set_one_buffer(int fd, int force_opt, int opt, const char* max_path, int v) {
  if (::setsockopt(fd, SOL_SOCKET, force_opt, &v, sizeof v) == 0) return true;
  if (static_cast<std::size_t>(v) > sysctl_size(max_path)) return false;
  return ::setsockopt(fd, SOL_SOCKET, opt, &v, sizeof v) == 0;
}

}  // namespace

int choose_sockets(int sockets_per_peer, int cpus, int ranks_on_host) {
  if (sockets_per_peer > 0) return std::min<int>(sockets_per_peer, kMaxSockets);
  return std::clamp(cpus / std::max(1, ranks_on_host), 2, 8);
}

void apply_socket_buffer(int fd, std::size_t bytes) {
  if (bytes == 0) return;
  int v = static_cast<int>(std::min<std::size_t>(bytes, 1u << 30));
  bool snd = set_one_buffer(fd, SO_SNDBUFFORCE, SO_SNDBUF, "/proc/sys/net/core/wmem_max", v);
  bool rcv = set_one_buffer(fd, SO_RCVBUFFORCE, SO_RCVBUF, "/proc/sys/net/core/rmem_max", v);
  if (!snd || !rcv)
    LOOM_LOG_DEBUG(Net,
                   "socket buffer of {} bytes exceeds net.core.[rw]mem_max: left to the kernel's "
                   "autotuning ({}{})",
                   bytes, snd ? "" : "send", rcv ? "" : (snd ? "receive" : ", receive"));
}

int TcpTransport::progress_threads() const {
  return choose_threads(options_.progress_threads, cpus_available(), ranks_on_host_);
}

int TcpTransport::sockets_per_peer() const {
  return choose_sockets(options_.sockets_per_peer, cpus_available(), ranks_on_host_);
}

Result<std::unique_ptr<TcpTransport>> TcpTransport::listen(int rank, int nranks,
                                                           std::uint64_t comm_id,
                                                           const net::SocketAddress& bind,
                                                           TcpOptions options) {
  std::vector<net::Fd> fds;
  std::vector<net::SocketAddress> addrs;
  std::vector<net::SocketAddress> binds{bind};
  binds.insert(binds.end(), options.rails.begin(), options.rails.end());
  for (const net::SocketAddress& b : binds) {
    auto fd = net::listen_on(b);
    if (!fd.is_ok())
      return fd.status().with_context(
          fmt::format("rank {}: tcp listener on {}", rank, b.to_string()));
    LOOM_RETURN_IF_ERROR(net::set_nonblocking(fd->get(), true));  // accepts never wait
    LOOM_ASSIGN_OR_RETURN(net::SocketAddress addr, net::bound_address(fd->get()));
    fds.push_back(std::move(fd).value());
    addrs.push_back(addr);
  }
  options.sockets_per_peer = std::clamp(options.sockets_per_peer, 0, static_cast<int>(kMaxSockets));
  if (options.stripe_min != 0) options.stripe_min = std::max(options.stripe_min, kMinStripe);
  return std::unique_ptr<TcpTransport>(
      new TcpTransport(rank, nranks, comm_id, std::move(fds), std::move(addrs), options));
}

TcpTransport::TcpTransport(int rank, int nranks, std::uint64_t comm_id,
                           std::vector<net::Fd> listeners,
                           std::vector<net::SocketAddress> addresses, TcpOptions options)
    : rank_(rank),
      nranks_(nranks),
      comm_id_(comm_id),
      listeners_(std::move(listeners)),
      address_(addresses.front()),
      rails_(addresses.begin() + 1, addresses.end()),
      options_(std::move(options)),
      conns_(static_cast<std::size_t>(nranks)),
      acceptor_(HelloRules{options_.secret, comm_id, rank}, options_.hello_timeout) {
  for (const net::Fd& fd : listeners_) listen_fds_.push_back(fd.get());
}

Connection* TcpTransport::get(int peer) const {
  return conns_[static_cast<std::size_t>(peer)].get();
}

namespace {

// A connection attempt that fails on the way (reset, refused, closed: an OS error or the peer's
// failure) names the peer it was for, so the communicator counts that peer as failed.
Status for_peer(Status st, int peer) {
  if (st.is_ok() || st.peer() >= 0) return st;
  if (st.code() == ErrorCode::SystemError) st = Status(ErrorCode::PeerFailed, st.message());
  return st.with_peer(peer);
}

}  // namespace

Status TcpTransport::ensure(const std::vector<int>& peers, Deadline deadline) {
  return connect_in_rank_order(
      rank_, peers, deadline, [this](int p) { return get(p) != nullptr; },
      [this](int p, Deadline d) { return for_peer(connect_to(p, d), p); },
      [this](int p, Deadline d) { return for_peer(accept_from(p, d), p); });
}

const std::vector<net::SocketAddress>& TcpTransport::rails_of(int peer) const {
  static const std::vector<net::SocketAddress> kNone;
  const auto p = static_cast<std::size_t>(peer);
  return p < peer_rails_.size() ? peer_rails_[p] : kNone;
}

Status TcpTransport::connect_to(int peer, Deadline deadline) {
  const int theirs = 1 + static_cast<int>(rails_of(peer).size());
  const int mine = 1 + static_cast<int>(rails_.size());
  const int nsockets =
      sockets_for_rails(sockets_per_peer(), std::max(mine, theirs), static_cast<int>(kMaxSockets));
  std::vector<net::Fd> socks;
  for (int i = 0; i < nsockets; ++i) {
    LOOM_ASSIGN_OR_RETURN(net::Fd fd, connect_socket(peer, i, nsockets, deadline));
    socks.push_back(std::move(fd));
  }
  if (std::max(mine, theirs) > 1)
    LOOM_LOG_INFO(Net, "rank {}: {} sockets to rank {} over {} rail(s) here and {} there", rank_,
                  nsockets, peer, mine, theirs);
  return add_connection(peer, std::move(socks), options_.stripe_min);
}

Result<net::Fd> TcpTransport::connect_socket(int peer, int index, int count, Deadline deadline) {
  const std::vector<net::SocketAddress>& theirs = rails_of(peer);
  const RailPair path =
      rail_of(index, 1 + static_cast<int>(rails_.size()), 1 + static_cast<int>(theirs.size()));
  const net::SocketAddress& addr = path.remote == 0
                                       ? peers_[static_cast<std::size_t>(peer)]
                                       : theirs[static_cast<std::size_t>(path.remote - 1)];
  // With rails here, every socket leaves from its rail's address (the primary's too), so each
  // interface carries its own share whatever the routing table prefers.
  const net::SocketAddress* from = nullptr;
  if (!rails_.empty()) from = path.local == 0 ? &address_ : &rails_[path.local - 1];
  auto fd = net::connect_with_retry(addr, from, deadline);
  if (!fd.is_ok())
    return fd.status().with_context(
        fmt::format("rank {}: connecting to rank {} at {}{}", rank_, peer, addr.to_string(),
                    from != nullptr ? " from " + from->to_string() : std::string()));
  Hello h;
  h.nsockets = static_cast<std::uint16_t>(count);
  h.comm_id = comm_id_;
  h.from_rank = rank_;
  h.to_rank = peer;
  h.socket_index = static_cast<std::uint32_t>(index);
  h.stripe_kib = static_cast<std::uint32_t>(options_.stripe_min >> 10);
  LOOM_RETURN_IF_ERROR(hello(fd->get(), h, peer, addr, deadline));
  return fd;
}

// The connecting side of the handshake (see wire.hpp): answer the acceptor's challenge with the
// hello, its proof and a challenge of our own, then check the acceptor's proof.
Status TcpTransport::hello(int fd, const Hello& h, int peer, const net::SocketAddress& addr,
                           Deadline deadline) const {
  const std::string what = fmt::format("rank {}: hello to rank {}", rank_, peer);
  crypto::Nonce challenge{};
  LOOM_RETURN_IF_ERROR(net::recv_all(fd, challenge.data(), challenge.size(), deadline, what));
  const crypto::Nonce mine = crypto::make_nonce();
  std::array<std::uint8_t, kHelloMessageBytes> msg{};
  const std::span<const std::uint8_t> fields(msg.data(), sizeof h);
  std::memcpy(msg.data(), &h, sizeof h);
  crypto::Mac mac = crypto::prove(options_.secret, kHelloDomain, challenge, fields);
  std::memcpy(msg.data() + sizeof h, mac.data(), mac.size());
  std::memcpy(msg.data() + sizeof h + mac.size(), mine.data(), mine.size());
  LOOM_RETURN_IF_ERROR(net::send_all(fd, msg.data(), msg.size(), deadline, what));
  crypto::Mac answer{};
  Status st = net::recv_all(fd, answer.data(), answer.size(), deadline, what);
  if (!st.is_ok())
    return make_error(st.code() == ErrorCode::Timeout ? ErrorCode::Timeout : ErrorCode::PeerFailed,
                      "rank {}: rank {} at {} did not accept our hello (another job's secret or "
                      "communicator, or not a loom rank?): {}",
                      rank_, peer, addr.to_string(), st.message());
  if (!crypto::mac_equal(answer, crypto::prove(options_.secret, kAcceptDomain, mine, fields)))
    return make_error(ErrorCode::PeerFailed,
                      "rank {}: the process at {} (rank {}'s address) failed to prove the job's "
                      "secret: connection refused",
                      rank_, addr.to_string(), peer);
  return Status::ok();
}

// Runs the handshakes of every connection the listener has (other peers' too: they are filed for
// their own accept_from) until `peer`'s sockets are all in.
Status TcpTransport::accept_from(int peer, Deadline deadline) {
  auto complete = [&] {
    auto it = pending_.find(peer);
    if (it == pending_.end()) return false;
    auto valid = std::count_if(it->second.fds.begin(), it->second.fds.end(),
                               [](const net::Fd& fd) { return fd.valid(); });
    return valid == it->second.nsockets;
  };
  for (;;) {
    for (AcceptedSocket& s :
         acceptor_.step(listen_fds_, [this](const Hello& h) { return admit(h); }))
      file(std::move(s));
    if (complete()) break;
    if (deadline.expired())
      return make_error(ErrorCode::Timeout,
                        "rank {}: timed out waiting for rank {} to connect (is it running and "
                        "calling the same collectives?)",
                        rank_, peer);
    acceptor_.wait(listen_fds_, deadline);
  }
  Pending p = std::move(pending_[peer]);
  pending_.erase(peer);
  return add_connection(peer, std::move(p.fds), p.stripe_min);
}

// Every socket of one peer must announce the same count and threshold.
bool TcpTransport::admit(const Hello& h) const {
  auto it = pending_.find(h.from_rank);
  return it == pending_.end() || (it->second.nsockets == h.nsockets &&
                                  it->second.stripe_min == std::size_t{h.stripe_kib} << 10);
}

// Files an authenticated socket under its peer.
void TcpTransport::file(AcceptedSocket s) {
  const Hello& h = s.hello;
  Pending& p = pending_[h.from_rank];
  p.nsockets = h.nsockets;
  p.stripe_min = std::size_t{h.stripe_kib} << 10;
  if (p.fds.size() <= h.socket_index) p.fds.resize(h.socket_index + 1);
  p.fds[h.socket_index] = std::move(s.fd);
}

Status TcpTransport::add_connection(int peer, std::vector<net::Fd> sockets,
                                    std::size_t stripe_min) {
  for (auto& s : sockets) {
    if (!s.valid())
      return make_error(ErrorCode::Internal, "rank {}: missing socket from rank {}", rank_, peer);
    LOOM_RETURN_IF_ERROR(net::set_nonblocking(s.get(), true));
    LOOM_RETURN_IF_ERROR(net::set_nodelay(s.get()));
    apply_socket_buffer(s.get(), options_.socket_buffer);
  }
  LOOM_LOG_INFO(Net, "rank {}: connected to rank {} over tcp ({} sockets, striping from {} KiB)",
                rank_, peer, sockets.size(), stripe_min == 0 ? 0 : 2 * stripe_min >> 10);
  auto conn =
      std::make_unique<TcpConnection>(rank_, peer, comm_id_, std::move(sockets), stripe_min);
  if (!progress_ && progress_threads() > 0) {
    LOOM_ASSIGN_OR_RETURN(progress_, TcpProgress::start(progress_threads(), rank_));
    LOOM_LOG_INFO(Net, "rank {}: {} tcp progress thread(s)", rank_, progress_->threads());
  }
  if (progress_) LOOM_RETURN_IF_ERROR(progress_->attach(*conn));
  conns_[static_cast<std::size_t>(peer)] = std::move(conn);
  return Status::ok();
}

}  // namespace loom::transport::tcp
