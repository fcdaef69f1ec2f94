#include "transports/ofi/ofi_connection.hpp"

#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "log/log.hpp"

namespace loom::transport::ofi {
namespace {

using namespace std::chrono_literals;

// How often a waiting connection looks at its liveness socket, and how long it keeps making
// progress after the peer's end-of-file (completions already on their way still count).
constexpr auto kLivenessInterval = 1ms;
constexpr auto kGoneGrace = 300ms;

}  // namespace

OfiConnection::OfiConnection(int self_rank, int peer, std::uint64_t comm_id, Fabric& fabric,
                             MrCache& mrs, fi_addr_t addr, net::Fd liveness,
                             const DeviceMemoryMode& device, OfiProgress* progress,
                             ExecutorFirstMutex* lock)
    : self_(self_rank),
      peer_(peer),
      comm_id_(comm_id),
      fabric_(fabric),
      mrs_(mrs),
      device_(device),
      addr_(addr),
      liveness_(std::move(liveness)),
      headers_(kTable),
      progress_(progress),
      lock_(lock) {}

std::unique_lock<std::mutex> OfiConnection::lock() {
  if (progress_ == nullptr) return {};
  return lock_->executor();
}

OfiConnection::~OfiConnection() = default;

Caps OfiConnection::caps() const {
  Caps c;
  c.device_memory = device_.enabled;
  return c;
}

std::string OfiConnection::who() const {
  return fmt::format("rank {} <-> rank {} (ofi, {})", self_, peer_, fabric_.info().provider);
}

Status OfiConnection::fail(Status why) {
  if (broken_.is_ok()) {
    broken_ = std::move(why);
    LOOM_LOG_DEBUG(Net, "{}", broken_.message());
  }
  return broken_;
}

Result<Request> OfiConnection::isend(const MemRegion& region, std::size_t off, std::size_t len,
                                     const Tag& tag) {
  return post(true, region, off, len, tag);
}

Result<Request> OfiConnection::irecv(const MemRegion& region, std::size_t off, std::size_t len,
                                     const Tag& tag) {
  return post(false, region, off, len, tag);
}

Result<Request> OfiConnection::post(bool is_send, const MemRegion& region, std::size_t off,
                                    std::size_t len, const Tag& tag) {
  auto lk = lock();
  if (!broken_.is_ok()) return broken_;
  if (region.space == MemoryKind::Device && !device_.enabled)
    return make_error(ErrorCode::Internal,
                      "{}: {} {} on device memory, but this transport does not register device "
                      "memory (FI_HMEM)",
                      who(), is_send ? "sending" : "receiving", describe_tag(tag));
  LOOM_ASSIGN_OR_RETURN(Op * op, ops_.allocate(who()));
  if (progress_ != nullptr) progress_->posted();
  op->is_send = is_send;
  op->data = static_cast<std::uint8_t*>(region.base) + off;
  op->len = len;
  op->region = region;
  op->tag = tag;
  op->ctx.base.complete = &OfiConnection::on_complete;
  op->ctx.conn = this;
  op->ctx.op = op;
  op->ctx.id = op->id;
  Header& h = headers_[op->id % kTable];
  h = Header{};
  if (is_send) {
    h.from_rank = static_cast<std::uint32_t>(self_);
    h.comm_id = comm_id_;
    h.tag = tag;
    h.length = len;
  }
  ++outstanding_;
  if (pending_.empty()) {
    auto accepted = try_post(*op);
    if (!accepted.is_ok()) return fail(accepted.status());
    if (*accepted) return Request{op->id};
  }
  pending_.push_back(op);
  return Request{op->id};
}

// Hands one operation to the provider; false on -FI_EAGAIN (try again after progress).
Result<bool> OfiConnection::try_post(Op& op) {
  Header& h = headers_[op.id % kTable];
  std::array<iovec, 2> iov{};
  std::array<void*, 2> desc{};
  iov[0] = {&h, sizeof h};
  LOOM_ASSIGN_OR_RETURN(desc[0], mrs_.desc(headers_.data(), headers_.size() * sizeof(Header)));
  std::size_t n = 1;
  if (op.len > 0) {
    iov[1] = {op.data, op.len};
    LOOM_ASSIGN_OR_RETURN(desc[1], payload_desc(op));
    n = 2;
  }
  ssize_t rc = 0;
  if (op.is_send)
    rc = fi_tsendv(fabric_.ep(), iov.data(), desc.data(), n, addr_,
                   fabric_tag(comm_id_, self_, op.tag), &op.ctx.base.fi);
  else
    rc = fi_trecvv(fabric_.ep(), iov.data(), desc.data(), n, addr_,
                   fabric_tag(comm_id_, peer_, op.tag), kIgnoreOpBits, &op.ctx.base.fi);
  if (rc == -FI_EAGAIN) return false;
  if (rc != 0)
    return make_error(ErrorCode::SystemError, "{}: posting {} to rank {}: {}", who(),
                      describe_tag(op.tag), peer_,
                      fi_error(op.is_send ? "fi_tsendv" : "fi_trecvv", static_cast<int>(rc)));
  op.posted = true;
  return true;
}

// Host payloads: pages around the message, when the provider asks for registration. Device
// payloads: the whole allocation, always (FI_MR_HMEM), keyed by its allocation id.
Result<void*> OfiConnection::payload_desc(const Op& op) {
  if (op.region.space != MemoryKind::Device) return mrs_.desc(op.data, op.len);
  if (op.region.alloc_id == 0)
    return make_error(ErrorCode::Internal, "{}: device buffer {} without an allocation id", who(),
                      op.region.base);
  HmemDevice kind{device_.iface, static_cast<std::uint64_t>(std::max(op.region.device, 0))};
  auto d = mrs_.device_desc(op.region.base, op.region.size, kind, op.region.alloc_id);
  if (!d.is_ok())
    return d.status().with_context(
        fmt::format("{}: registering device buffer {} ({} bytes, device {}) for {}", who(),
                    op.region.base, op.region.size, op.region.device, describe_tag(op.tag)));
  return d;
}

Status OfiConnection::flush_pending() {
  while (!pending_.empty()) {
    LOOM_ASSIGN_OR_RETURN(bool accepted, try_post(*pending_.front()));
    if (!accepted) return Status::ok();
    pending_.pop_front();
  }
  return Status::ok();
}

void OfiConnection::on_complete(OpContext* ctx, const fi_cq_tagged_entry* entry,
                                const fi_cq_err_entry* err) {
  auto* c = reinterpret_cast<Ctx*>(ctx);
  if (c->conn->progress_ != nullptr) c->conn->progress_->finished();
  if (c->op->id != c->id || c->op->complete) return;  // a request failed and released earlier
  c->conn->complete(*c->op, entry, err);
}

void OfiConnection::complete(Op& op, const fi_cq_tagged_entry* entry, const fi_cq_err_entry* err) {
  op.complete = true;
  --outstanding_;
  if (err != nullptr) {
    if (!op.is_send && err->err == FI_ETRUNC) {
      op.error = check_header(op, sizeof(Header) + op.len + err->olen);
      if (op.error.is_ok())
        op.error = make_error(ErrorCode::Mismatch,
                              "{}: rank {} sent more than the {} bytes rank {} expected for {}",
                              who(), peer_, op.len, self_, describe_tag(op.tag));
      return;
    }
    op.error = make_error(ErrorCode::PeerFailed, "{}: {} {} rank {} failed: {}", who(),
                          op.is_send ? "sending" : "receiving", describe_tag(op.tag),
                          op.is_send ? "to" : "from", fi_error("completion", -err->err));
    return;
  }
  if (!op.is_send) op.error = check_header(op, entry->len);
}

Status OfiConnection::check_header(const Op& op, std::size_t received) const {
  const Header& got = headers_[op.id % kTable];
  if (got.magic != kOfiMagic || got.comm_id != comm_id_ ||
      got.from_rank != static_cast<std::uint32_t>(peer_) || received < sizeof(Header))
    return make_error(ErrorCode::Mismatch,
                      "{}: corrupt or foreign message from rank {} (magic {:#x}, communicator "
                      "{:#x}, sender {}; expected communicator {:#x})",
                      who(), peer_, got.magic, got.comm_id, got.from_rank, comm_id_);
  if (!(got.tag == op.tag) || got.length != op.len || received != sizeof(Header) + got.length)
    return mismatched_message(self_, peer_, op.tag, op.len, got.tag, got.length);
  return Status::ok();
}

Status OfiConnection::progress() {
  auto handled = fabric_.progress();
  if (!handled.is_ok()) return handled.status().with_context(who());
  LOOM_RETURN_IF_ERROR(flush_pending());
  return check_peer();
}

// The peer never writes to the liveness socket: readable means end-of-file or an error, i.e.
// the peer process or its communicator has gone.
Status OfiConnection::check_peer() {
  auto now = Clock::now();
  if (!peer_gone_seen_) {
    if (now < next_liveness_check_) return Status::ok();
    next_liveness_check_ = now + kLivenessInterval;
    char byte = 0;
    ssize_t n = ::recv(liveness_.get(), &byte, 1, MSG_DONTWAIT | MSG_PEEK);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return Status::ok();
    peer_gone_seen_ = true;
    peer_gone_ = now;
  }
  if (outstanding_ == 0 || now - peer_gone_ < kGoneGrace) return Status::ok();
  return make_error(ErrorCode::PeerFailed,
                    "{}: rank {} went away (its liveness connection closed: it exited, failed or "
                    "destroyed its communicator) with {} requests to or from it pending",
                    who(), peer_, outstanding_);
}

Result<bool> OfiConnection::test(const Request& request) {
  auto lk = lock();
  if (progress_ != nullptr) progress_->consume();
  LOOM_ASSIGN_OR_RETURN(Op * found, ops_.find(request, who()));
  Op& op = *found;
  if (!op.complete) {
    if (!broken_.is_ok()) {
      ops_.release(op);
      return broken_;
    }
    if (Status st = progress(); !st.is_ok()) {
      for (Op* p : pending_) {
        p->complete = true;
        if (progress_ != nullptr) progress_->finished();  // never reached the provider
      }
      pending_.clear();
      return fail(st);
    }
  }
  if (!op.complete) return false;
  Status err = op.error;
  ops_.release(op);
  if (!err.is_ok()) return fail(err);
  return true;
}

bool OfiConnection::prepare_wait(std::vector<pollfd>& fds) {
  auto lk = lock();
  if (!pending_.empty() || peer_gone_seen_) return false;
  if (outstanding_ > 0) fds.push_back({liveness_.get(), POLLIN, 0});
  if (progress_ != nullptr) {  // the thread reads the queue and signals completions
    fds.push_back({progress_->notify_fd(), POLLIN, 0});
    return true;
  }
  return fabric_.prepare_wait(fds);
}

}  // namespace loom::transport::ofi
