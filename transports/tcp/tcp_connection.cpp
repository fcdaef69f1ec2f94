#include "transports/tcp/tcp_connection.hpp"

#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>

#include "log/log.hpp"

namespace loom::transport::tcp {
namespace {

constexpr std::size_t kMaxBatch = 16;  // messages per sendmsg

bool would_block(int e) {
  return e == EAGAIN || e == EWOULDBLOCK || e == EINTR;
}

}  // namespace

TcpConnection::TcpConnection(int self_rank, int peer, std::uint64_t comm_id,
                             std::vector<net::Fd> sockets)
    : self_(self_rank), peer_(peer), comm_id_(comm_id) {
  sockets_.reserve(sockets.size());
  for (auto& fd : sockets) sockets_.push_back(Socket{std::move(fd), {}, {}});
}

std::string TcpConnection::who() const {
  return fmt::format("rank {} <-> rank {} (tcp)", self_, peer_);
}

Status TcpConnection::fail(Status why) {
  if (broken_.is_ok()) {
    broken_ = why;
    LOOM_LOG_DEBUG(Net, "{}", why.message());
  }
  return broken_;
}

Result<TcpConnection::Op*> TcpConnection::allocate(bool is_send) {
  if (!broken_.is_ok()) return broken_;
  LOOM_ASSIGN_OR_RETURN(Op * op, ops_.allocate(who()));
  op->is_send = is_send;
  std::uint64_t n = is_send ? sends_posted_++ : recvs_posted_++;
  op->socket = static_cast<std::size_t>(n % sockets_.size());
  return op;
}

Result<Request> TcpConnection::isend(const MemRegion& region, std::size_t off, std::size_t len,
                                     const Tag& tag) {
  LOOM_ASSIGN_OR_RETURN(Op * op, allocate(true));
  op->data = static_cast<std::uint8_t*>(region.base) + off;
  op->len = len;
  op->header.comm_id = comm_id_;
  op->header.tag = tag;
  op->header.length = len;
  Socket& s = sockets_[op->socket];
  s.sendq.push_back(op);
  if (s.sendq.size() == 1) {
    if (Status st = progress_send(s); !st.is_ok()) return fail(st);
  }
  return Request{op->id};
}

Result<Request> TcpConnection::irecv(const MemRegion& region, std::size_t off, std::size_t len,
                                     const Tag& tag) {
  LOOM_ASSIGN_OR_RETURN(Op * op, allocate(false));
  op->data = static_cast<std::uint8_t*>(region.base) + off;
  op->len = len;
  op->expected = tag;
  sockets_[op->socket].recvq.push_back(op);
  return Request{op->id};
}

Result<bool> TcpConnection::test(const Request& request) {
  LOOM_ASSIGN_OR_RETURN(Op * found, ops_.find(request, who()));
  Op& op = *found;
  if (!op.complete) {
    if (!broken_.is_ok()) return broken_;
    Socket& s = sockets_[op.socket];
    Status st = op.is_send ? progress_send(s) : progress_recv(s);
    if (!st.is_ok()) return fail(st);
  }
  if (!op.complete) return false;
  ops_.release(op);
  return true;
}

// Writes as much of the queued messages as the socket takes, several per sendmsg.
Status TcpConnection::progress_send(Socket& s) {
  while (!s.sendq.empty()) {
    std::array<iovec, 2 * kMaxBatch> iov{};
    std::size_t niov = 0;
    for (std::size_t i = 0; i < s.sendq.size() && i < kMaxBatch; ++i) {
      Op* op = s.sendq[i];
      if (op->header_done < sizeof(MessageHeader))
        iov[niov++] = {reinterpret_cast<std::uint8_t*>(&op->header) + op->header_done,
                       sizeof(MessageHeader) - op->header_done};
      if (op->done < op->len) iov[niov++] = {op->data + op->done, op->len - op->done};
    }
    msghdr msg{};
    msg.msg_iov = iov.data();
    msg.msg_iovlen = niov;
    ssize_t n = ::sendmsg(s.fd.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (would_block(errno)) return Status::ok();
      return make_error(ErrorCode::PeerFailed, "{}: sending to rank {} failed: {}", who(), peer_,
                        std::strerror(errno));
    }
    auto left = static_cast<std::size_t>(n);
    while (!s.sendq.empty()) {
      Op* op = s.sendq.front();
      std::size_t h = std::min(left, sizeof(MessageHeader) - op->header_done);
      op->header_done += h;
      left -= h;
      std::size_t d = std::min(left, op->len - op->done);
      op->done += d;
      left -= d;
      if (op->header_done < sizeof(MessageHeader) || op->done < op->len) break;
      op->complete = true;
      s.sendq.pop_front();
    }
  }
  return Status::ok();
}

// Reads headers and payloads of posted receives, validating each header before its payload.
Status TcpConnection::progress_recv(Socket& s) {
  while (!s.recvq.empty()) {
    Op* op = s.recvq.front();
    bool in_header = op->header_done < sizeof(MessageHeader);
    std::uint8_t* dst = in_header ? reinterpret_cast<std::uint8_t*>(&op->header) + op->header_done
                                  : op->data + op->done;
    std::size_t want = in_header ? sizeof(MessageHeader) - op->header_done : op->len - op->done;
    if (want > 0) {
      ssize_t n = ::recv(s.fd.get(), dst, want, MSG_DONTWAIT);
      if (n == 0)
        return make_error(ErrorCode::PeerFailed,
                          "{}: rank {} closed the connection (exited or failed) while rank {} "
                          "waited for {}",
                          who(), peer_, self_, describe_tag(op->expected));
      if (n < 0) {
        if (would_block(errno)) return Status::ok();
        return make_error(ErrorCode::PeerFailed, "{}: receiving from rank {} failed: {}", who(),
                          peer_, std::strerror(errno));
      }
      (in_header ? op->header_done : op->done) += static_cast<std::size_t>(n);
      if (in_header && op->header_done == sizeof(MessageHeader))
        LOOM_RETURN_IF_ERROR(check_header(*op, op->header));
    }
    if (op->header_done == sizeof(MessageHeader) && op->done == op->len) {
      op->complete = true;
      s.recvq.pop_front();
    }
  }
  return Status::ok();
}

Status TcpConnection::check_header(const Op& op, const MessageHeader& got) const {
  HeaderCheck check = tcp::check_header(got, comm_id_, op.expected, op.len);
  if (check == HeaderCheck::Corrupt)
    return make_error(ErrorCode::Mismatch,
                      "{}: corrupt or foreign message header from rank {} (magic {:#x}, version "
                      "{}, communicator {:#x}; expected communicator {:#x})",
                      who(), peer_, got.magic, got.version, got.comm_id, comm_id_);
  if (check == HeaderCheck::Mismatch)
    return mismatched_message(self_, peer_, op.expected, op.len, got.tag, got.length);
  return Status::ok();
}

bool TcpConnection::prepare_wait(std::vector<pollfd>& fds) {
  for (const Socket& s : sockets_) {
    short events = 0;
    if (!s.sendq.empty()) events |= POLLOUT;
    if (!s.recvq.empty()) events |= POLLIN;
    if (events != 0) fds.push_back({s.fd.get(), events, 0});
  }
  return true;
}

}  // namespace loom::transport::tcp
