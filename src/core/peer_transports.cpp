#include "core/peer_transports.hpp"

namespace loom::detail {

namespace {

// Whether some peer of `rank` talks over `k`.
bool used(TransportKind k, int rank, const std::vector<TransportKind>& choice) {
  for (std::size_t p = 0; p < choice.size(); ++p)
    if (static_cast<int>(p) != rank && choice[p] == k) return true;
  return false;
}

}  // namespace

Result<std::unique_ptr<PeerTransports>> PeerTransports::create(
    const transport::CreateContext& ctx, std::vector<TransportKind> choice,
    std::vector<std::unique_ptr<transport::Transport>> made, const transport::Registry& registry) {
  ByKind by_kind;
  for (auto& t : made) {
    auto k = transport::kind_named(t->name());
    if (!k)
      return make_error(ErrorCode::Internal, "rank {}: transport '{}' has no TransportKind",
                        ctx.rank, t->name());
    by_kind[static_cast<std::size_t>(*k)] = std::move(t);
  }
  // Shared memory first, then the network (the order ranks have always created them in).
  for (TransportKind k : {TransportKind::Shm, TransportKind::Ofi, TransportKind::Tcp}) {
    auto& slot = by_kind[static_cast<std::size_t>(k)];
    if (slot || !used(k, ctx.rank, choice)) continue;
    LOOM_ASSIGN_OR_RETURN(slot, registry.create(k, ctx));
  }
  return std::make_unique<PeerTransports>(ctx.rank, std::move(choice), std::move(by_kind));
}

PeerTransports::PeerTransports(int rank, std::vector<TransportKind> choice, ByKind transports)
    : rank_(rank), choice_(std::move(choice)), by_kind_(std::move(transports)) {}

PeerTransports::~PeerTransports() {
  for (TransportKind k : {TransportKind::Ofi, TransportKind::Shm, TransportKind::Tcp})
    by_kind_[static_cast<std::size_t>(k)].reset();  // the order they have always closed in
}

Status PeerTransports::ensure(const std::vector<int>& peers, Deadline deadline) {
  std::array<std::vector<int>, kNumTransportKinds> missing;  // by kind
  for (int p : peers)
    if (p != rank_ && get(p) == nullptr) missing[static_cast<std::size_t>(kind(p))].push_back(p);
  // Shared memory first, the network last (the order ranks have always connected in).
  for (TransportKind k : {TransportKind::Shm, TransportKind::Ofi, TransportKind::Tcp}) {
    const auto& group = missing[static_cast<std::size_t>(k)];
    if (group.empty()) continue;
    transport::Transport* t = transport(k);
    if (t == nullptr)
      return make_error(ErrorCode::Internal, "rank {}: the {} transport was not created", rank_,
                        to_string(k));
    LOOM_RETURN_IF_ERROR(t->ensure(group, deadline));
  }
  return Status::ok();
}

transport::PlanHints PeerTransports::plan_hints() const {
  transport::PlanHints all;
  for (const auto& t : by_kind_)
    if (t) all.buffered_ring_sends = all.buffered_ring_sends || t->plan_hints().buffered_ring_sends;
  return all;
}

transport::Connection* PeerTransports::get(int peer) const {
  transport::Transport* t = transport(kind(peer));
  return t ? t->get(peer) : nullptr;
}

}  // namespace loom::detail
