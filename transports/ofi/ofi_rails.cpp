#include "transports/ofi/ofi_rails.hpp"

#include <algorithm>

namespace loom::transport::ofi {

OfiRails::OfiRails(std::vector<std::unique_ptr<OfiTransport>> rails, int nranks,
                   std::size_t stripe_min, PeerRails peer_rails)
    : conns_(static_cast<std::size_t>(nranks)),
      rails_(std::move(rails)),
      stripe_min_(stripe_min),
      peer_rails_(std::move(peer_rails)),
      shared_(static_cast<std::size_t>(nranks), 0) {}

OfiRails::~OfiRails() {
  conns_.clear();  // they point into the rails' connections
}

Status OfiRails::ensure(const std::vector<int>& peers, Deadline deadline) {
  // Every call asks: once each peer's striped connection exists there is nothing to do.
  if (std::all_of(peers.begin(), peers.end(),
                  [&](int p) { return conns_[static_cast<std::size_t>(p)] != nullptr; }))
    return Status::ok();
  for (int p : peers) {
    std::size_t& shared = shared_[static_cast<std::size_t>(p)];
    if (shared != 0) continue;
    std::size_t theirs = rails_.size();
    if (peer_rails_) {
      LOOM_ASSIGN_OR_RETURN(theirs, peer_rails_(p, deadline));
    }
    shared = std::max<std::size_t>(1, std::min(theirs, rails_.size()));
  }
  for (std::size_t i = 0; i < rails_.size(); ++i) {
    std::vector<int> on_rail;  // the peers that have rail i too
    for (int p : peers)
      if (shared_[static_cast<std::size_t>(p)] > i) on_rail.push_back(p);
    if (!on_rail.empty()) LOOM_RETURN_IF_ERROR(rails_[i]->ensure(on_rail, deadline));
  }
  for (int p : peers) {
    auto& c = conns_[static_cast<std::size_t>(p)];
    if (c) continue;
    std::vector<Connection*> each;
    for (std::size_t i = 0; i < shared_[static_cast<std::size_t>(p)]; ++i)
      each.push_back(rails_[i]->get(p));
    c = std::make_unique<StripedConnection>(std::move(each), stripe_min_);
  }
  return Status::ok();
}

Connection* OfiRails::get(int peer) const {
  return conns_[static_cast<std::size_t>(peer)].get();
}

std::optional<DeviceMemorySupport> OfiRails::device_memory_support() const {
  std::optional<DeviceMemorySupport> s = rails_.front()->device_memory_support();
  for (const auto& r : rails_) {
    auto rs = r->device_memory_support();
    if (!rs || !s) return std::nullopt;
    s->registers = s->registers && rs->registers;
  }
  return s;
}

Status OfiRails::enable_device_memory(std::string_view runtime, const void* probe,
                                      std::size_t bytes, int ordinal) {
  for (auto& r : rails_)
    LOOM_RETURN_IF_ERROR(r->enable_device_memory(runtime, probe, bytes, ordinal));
  return Status::ok();
}

}  // namespace loom::transport::ofi
