#include "core/peer_transports.hpp"

namespace loom::detail {

PeerTransports::PeerTransports(int rank, std::vector<TransportKind> choice,
                               std::unique_ptr<transport::tcp::TcpTransport> tcp,
                               std::unique_ptr<transport::shm::ShmTransport> shm)
    : rank_(rank), choice_(std::move(choice)), tcp_(std::move(tcp)), shm_(std::move(shm)) {}

Status PeerTransports::ensure(const std::vector<int>& peers, Deadline deadline) {
  std::vector<int> tcp_peers, shm_peers;
  for (int p : peers) {
    if (p == rank_ || get(p) != nullptr) continue;
    (kind(p) == TransportKind::Shm ? shm_peers : tcp_peers).push_back(p);
  }
  if (!shm_peers.empty()) {
    if (!shm_)
      return make_error(ErrorCode::Internal, "rank {}: shared memory transport not created",
                        rank_);
    LOOM_RETURN_IF_ERROR(shm_->ensure(shm_peers, deadline));
  }
  if (!tcp_peers.empty()) LOOM_RETURN_IF_ERROR(tcp_->ensure(tcp_peers, deadline));
  return Status::ok();
}

transport::Connection* PeerTransports::get(int peer) const {
  if (kind(peer) == TransportKind::Shm) return shm_ ? shm_->get(peer) : nullptr;
  return tcp_->get(peer);
}

}  // namespace loom::detail
