#include "transports/ofi/ofi_rails.hpp"

namespace loom::transport::ofi {

OfiRails::OfiRails(std::vector<std::unique_ptr<OfiTransport>> rails, int nranks,
                   std::size_t stripe_min)
    : conns_(static_cast<std::size_t>(nranks)), rails_(std::move(rails)), stripe_min_(stripe_min) {}

OfiRails::~OfiRails() {
  conns_.clear();  // they point into the rails' connections
}

Status OfiRails::ensure(const std::vector<int>& peers, Deadline deadline) {
  for (auto& r : rails_) LOOM_RETURN_IF_ERROR(r->ensure(peers, deadline));
  for (int p : peers) {
    auto& c = conns_[static_cast<std::size_t>(p)];
    if (c) continue;
    std::vector<Connection*> each;
    for (auto& r : rails_) each.push_back(r->get(p));
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
