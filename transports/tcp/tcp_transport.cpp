#include "transports/tcp/tcp_transport.hpp"

#include <algorithm>
#include <array>
#include <cstring>

#include "log/log.hpp"
#include "transports/connect_order.hpp"
#include "transports/tcp/wire.hpp"

namespace loom::transport::tcp {

Result<std::unique_ptr<TcpTransport>> TcpTransport::listen(int rank, int nranks,
                                                           std::uint64_t comm_id,
                                                           const net::SocketAddress& bind,
                                                           TcpOptions options) {
  LOOM_ASSIGN_OR_RETURN(net::Fd fd, net::listen_on(bind));
  LOOM_ASSIGN_OR_RETURN(net::SocketAddress addr, net::bound_address(fd.get()));
  options.sockets_per_peer = std::clamp(options.sockets_per_peer, 1, 16);
  return std::unique_ptr<TcpTransport>(
      new TcpTransport(rank, nranks, comm_id, std::move(fd), addr, options));
}

TcpTransport::TcpTransport(int rank, int nranks, std::uint64_t comm_id, net::Fd listener,
                           net::SocketAddress address, TcpOptions options)
    : rank_(rank),
      nranks_(nranks),
      comm_id_(comm_id),
      listener_(std::move(listener)),
      address_(address),
      options_(options),
      conns_(static_cast<std::size_t>(nranks)) {}

Connection* TcpTransport::get(int peer) const {
  return conns_[static_cast<std::size_t>(peer)].get();
}

Status TcpTransport::ensure(const std::vector<int>& peers, Deadline deadline) {
  return connect_in_rank_order(
      rank_, peers, deadline, [this](int p) { return get(p) != nullptr; },
      [this](int p, Deadline d) { return connect_to(p, d); },
      [this](int p, Deadline d) { return accept_from(p, d); });
}

Status TcpTransport::connect_to(int peer, Deadline deadline) {
  const net::SocketAddress& addr = peers_[static_cast<std::size_t>(peer)];
  std::vector<net::Fd> socks;
  for (int i = 0; i < options_.sockets_per_peer; ++i) {
    auto fd = net::connect_with_retry(addr, deadline);
    if (!fd.is_ok())
      return fd.status().with_context(
          fmt::format("rank {}: connecting to rank {} at {}", rank_, peer, addr.to_string()));
    Hello h;
    h.nsockets = static_cast<std::uint16_t>(options_.sockets_per_peer);
    h.comm_id = comm_id_;
    h.from_rank = rank_;
    h.to_rank = peer;
    h.socket_index = static_cast<std::uint32_t>(i);
    const std::string what = fmt::format("rank {}: hello to rank {}", rank_, peer);
    crypto::Nonce nonce{};
    LOOM_RETURN_IF_ERROR(net::recv_all(fd->get(), nonce.data(), nonce.size(), deadline, what));
    std::array<std::uint8_t, sizeof(Hello) + sizeof(crypto::Mac)> msg{};
    std::memcpy(msg.data(), &h, sizeof h);
    crypto::Mac mac = crypto::prove(options_.secret, kHelloDomain, nonce,
                                    std::span<const std::uint8_t>(msg.data(), sizeof h));
    std::memcpy(msg.data() + sizeof h, mac.data(), mac.size());
    LOOM_RETURN_IF_ERROR(net::send_all(fd->get(), msg.data(), msg.size(), deadline, what));
    socks.push_back(std::move(fd).value());
  }
  return add_connection(peer, std::move(socks));
}

Status TcpTransport::accept_from(int peer, Deadline deadline) {
  auto complete = [&] {
    auto it = pending_.find(peer);
    if (it == pending_.end()) return false;
    auto valid = std::count_if(it->second.begin(), it->second.end(),
                               [](const net::Fd& fd) { return fd.valid(); });
    return valid == options_.sockets_per_peer;
  };
  while (!complete()) {
    Status st = accept_one(deadline);
    if (st.code() == ErrorCode::Timeout)
      return make_error(ErrorCode::Timeout,
                        "rank {}: timed out waiting for rank {} to connect (is it running and "
                        "calling the same collectives?)",
                        rank_, peer);
    LOOM_RETURN_IF_ERROR(st);
  }
  auto socks = std::move(pending_[peer]);
  pending_.erase(peer);
  return add_connection(peer, std::move(socks));
}

// Accepts one socket and files it under its peer; foreign or malformed hellos are dropped.
Status TcpTransport::accept_one(Deadline deadline) {
  LOOM_ASSIGN_OR_RETURN(net::Fd fd, net::accept_until(listener_.get(), deadline));
  Hello h;
  Deadline hello_deadline = deadline.earliest(Deadline::after(std::chrono::seconds(10)));
  const crypto::Nonce nonce = crypto::make_nonce();
  std::array<std::uint8_t, sizeof(Hello) + sizeof(crypto::Mac)> msg{};
  Status st = net::send_all(fd.get(), nonce.data(), nonce.size(), hello_deadline, "challenge");
  if (st.is_ok()) st = net::recv_all(fd.get(), msg.data(), msg.size(), hello_deadline, "hello");
  if (st.is_ok()) {
    crypto::Mac got{};
    std::memcpy(got.data(), msg.data() + sizeof h, got.size());
    auto want = crypto::prove(options_.secret, kHelloDomain, nonce,
                              std::span<const std::uint8_t>(msg.data(), sizeof h));
    if (!crypto::mac_equal(got, want)) {
      LOOM_LOG_WARN(Net,
                    "rank {}: dropped a connection that failed authentication (wrong job secret)",
                    rank_);
      return Status::ok();
    }
    std::memcpy(&h, msg.data(), sizeof h);
  }
  bool ok = st.is_ok() && h.magic == kHelloMagic && h.version == kWireVersion &&
            h.comm_id == comm_id_ && h.to_rank == rank_ && h.from_rank >= 0 &&
            h.from_rank < rank_ && h.nsockets == options_.sockets_per_peer &&
            h.socket_index < h.nsockets;
  if (!ok) {
    LOOM_LOG_WARN(
        Net, "rank {}: dropped a connection with an invalid hello ({})", rank_,
        st.is_ok() ? "wrong magic, version, communicator, rank or socket count" : st.message());
    return Status::ok();
  }
  auto& v = pending_[h.from_rank];
  if (v.size() <= h.socket_index) v.resize(h.socket_index + 1);
  v[h.socket_index] = std::move(fd);
  return Status::ok();
}

Status TcpTransport::add_connection(int peer, std::vector<net::Fd> sockets) {
  for (auto& s : sockets) {
    if (!s.valid())
      return make_error(ErrorCode::Internal, "rank {}: missing socket from rank {}", rank_, peer);
    LOOM_RETURN_IF_ERROR(net::set_nonblocking(s.get(), true));
    LOOM_RETURN_IF_ERROR(net::set_nodelay(s.get()));
    LOOM_RETURN_IF_ERROR(net::set_buffer_sizes(s.get(), options_.socket_buffer));
  }
  LOOM_LOG_INFO(Net, "rank {}: connected to rank {} over tcp ({} sockets)", rank_, peer,
                sockets.size());
  conns_[static_cast<std::size_t>(peer)] =
      std::make_unique<TcpConnection>(rank_, peer, comm_id_, std::move(sockets));
  return Status::ok();
}

}  // namespace loom::transport::tcp
