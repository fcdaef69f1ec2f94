#include "transports/striped/striped_connection.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace loom::transport {

StripedConnection::StripedConnection(std::vector<Connection*> rails, std::size_t stripe_min)
    : rails_(std::move(rails)), stripe_min_(stripe_min) {}

Caps StripedConnection::caps() const {
  Caps c = rails_.front()->caps();
  for (const Connection* r : rails_) {
    const Caps rc = r->caps();
    c.host_memory = c.host_memory && rc.host_memory;
    c.device_memory = c.device_memory && rc.device_memory;
    c.direct_load_store = false;
    c.stream_ordered = c.stream_ordered && rc.stream_ordered;
  }
  c.peeks = false;  // a rail's next unread part is not the next unread message
  return c;
}

Result<Request> StripedConnection::isend(const MemRegion& region, std::size_t off, std::size_t len,
                                         const Tag& tag) {
  return post(Kind::Send, region, off, len, tag);
}

Result<Request> StripedConnection::isend_buffered(const MemRegion& region, std::size_t off,
                                                  std::size_t len, const Tag& tag) {
  return post(Kind::BufferedSend, region, off, len, tag);
}

Result<Request> StripedConnection::irecv(const MemRegion& region, std::size_t off, std::size_t len,
                                         const Tag& tag) {
  return post(Kind::Recv, region, off, len, tag);
}

// Posts the parts of one message on consecutive rails. A part that fails to post leaves the
// connection unusable (the peer counts parts the same way): the error is the caller's to report,
// and the engine fails the communicator with it.
Result<Request> StripedConnection::post(Kind kind, const MemRegion& region, std::size_t off,
                                        std::size_t len, const Tag& tag) {
  if (!failed_.is_ok()) return failed_;
  LOOM_ASSIGN_OR_RETURN(Op * op, ops_.allocate([this] {
    return fmt::format("{} rails to rank {}", name(), peer());
  }));
  const std::size_t n = stripe_parts(len, rails_.size(), stripe_min_);
  const std::size_t each = stripe_part_len(len, n);
  std::size_t& next = kind == Kind::Recv ? next_recv_ : next_send_;
  op->nparts = n;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t at = i * each;
    const std::size_t part_len = i + 1 < n ? each : len - at;
    Part& part = op->parts[i];
    part.rail = rails_[next];
    next = (next + 1) % rails_.size();
    Result<Request> r = kind == Kind::Recv ? part.rail->irecv(region, off + at, part_len, tag)
                        : kind == Kind::Send
                            ? part.rail->isend(region, off + at, part_len, tag)
                            : part.rail->isend_buffered(region, off + at, part_len, tag);
    if (!r.is_ok()) {
      RequestTable<Op>::release(*op);
      failed_ = r.status();
      return r.status();
    }
    part.request = *r;
  }
  return Request{op->id};
}

Result<bool> StripedConnection::test(const Request& request) {
  LOOM_ASSIGN_OR_RETURN(Op * op, ops_.find(request, [this] {
    return fmt::format("{} rails to rank {}", name(), peer());
  }));
  bool all = true;
  for (std::size_t i = 0; i < op->nparts; ++i) {
    Part& part = op->parts[i];
    if (part.done) continue;
    auto r = part.rail->test(part.request);
    if (!r.is_ok()) {
      if (failed_.is_ok()) failed_ = r.status();
      return r.status();
    }
    part.done = *r;
    all = all && part.done;
  }
  if (all) RequestTable<Op>::release(*op);
  return all;
}

bool StripedConnection::prepare_wait(std::vector<pollfd>& fds) {
  bool may_block = true;
  for (Connection* r : rails_) may_block = r->prepare_wait(fds) && may_block;
  return may_block;
}

}  // namespace loom::transport
