#include "transports/tcp/tcp_connection.hpp"

#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/socket.hpp"
#include "log/log.hpp"

namespace loom::transport::tcp {
namespace {

using net::would_block;

constexpr std::size_t kMaxBatch = 16;  // parts per sendmsg
constexpr std::size_t kHeader = sizeof(MessageHeader);

}  // namespace

TcpConnection::TcpConnection(int self_rank, int peer, std::uint64_t comm_id,
                             std::vector<net::Fd> sockets, std::size_t stripe_min)
    : self_(self_rank), peer_(peer), comm_id_(comm_id), stripe_min_(stripe_min) {
  sockets_.reserve(sockets.size());
  for (auto& fd : sockets) {
    Socket s;
    s.fd = std::move(fd);
    s.stage = std::make_unique<std::uint8_t[]>(kStageBytes);
    sockets_.push_back(std::move(s));
  }
}

std::string TcpConnection::who() const {
  return fmt::format("rank {} <-> rank {} (tcp)", self_, peer_);
}

Status TcpConnection::fail(Status why) {
  if (broken_.is_ok()) {
    broken_ = std::move(why);
    LOOM_LOG_DEBUG(Net, "{}", broken_.message());
  }
  return broken_;
}

// Allocates the request and splits it into parts on consecutive sockets (see wire.hpp).
Result<TcpConnection::Op*> TcpConnection::post(bool is_send, std::uint8_t* data, std::size_t len,
                                               const Tag& tag) {
  if (!broken_.is_ok()) return broken_;
  LOOM_ASSIGN_OR_RETURN(Op * op, ops_.allocate([this] { return who(); }));
  op->is_send = is_send;
  op->len = len;
  op->expected = tag;
  const std::size_t n = stripe_parts(len, sockets_.size(), stripe_min_);
  const std::size_t each = stripe_part_len(len, n);
  std::uint64_t& next = is_send ? next_send_socket_ : next_recv_socket_;
  op->nparts = n;
  op->parts_left = n;
  for (std::size_t i = 0; i < n; ++i) {
    Part& p = op->parts[i];
    p.op = op;
    p.index = static_cast<std::uint16_t>(i);
    p.socket = static_cast<std::uint16_t>((next + i) % sockets_.size());
    p.data = data + i * each;
    p.len = i + 1 < n ? each : len - i * each;
    if (is_send) {
      p.header.comm_id = comm_id_;
      p.header.tag = tag;
      p.header.length = len;
      p.header.part = p.index;
    }
  }
  next += n;
  return op;
}

Result<Request> TcpConnection::isend(const MemRegion& region, std::size_t off, std::size_t len,
                                     const Tag& tag) {
  auto lk = lock();
  LOOM_ASSIGN_OR_RETURN(Op * op,
                        post(true, static_cast<std::uint8_t*>(region.base) + off, len, tag));
  for (std::size_t i = 0; i < op->nparts; ++i)
    sockets_[op->parts[i].socket].sendq.push_back(&op->parts[i]);
  // Write right away where this message is first in line (the common, uncongested case); a
  // progress thread takes over what the sockets did not take.
  bool left_over = false;
  for (std::size_t i = 0; i < op->nparts; ++i) {
    Socket& s = sockets_[op->parts[i].socket];
    if (s.sendq.front() != &op->parts[i]) continue;
    if (Status st = progress_send(s); !st.is_ok()) return fail(st);
    left_over = left_over || !s.sendq.empty();
  }
  if (left_over) wake_thread();
  return Request{op->id};
}

Result<Request> TcpConnection::irecv(const MemRegion& region, std::size_t off, std::size_t len,
                                     const Tag& tag) {
  auto lk = lock();
  LOOM_ASSIGN_OR_RETURN(Op * op,
                        post(false, static_cast<std::uint8_t*>(region.base) + off, len, tag));
  bool first = false;
  for (std::size_t i = 0; i < op->nparts; ++i) {
    auto& q = sockets_[op->parts[i].socket].recvq;
    q.push_back(&op->parts[i]);
    first = first || q.size() == 1;
  }
  if (first) wake_thread();
  return Request{op->id};
}

// In progress-thread mode the lock guards everything below; without a thread it is not taken.
std::unique_lock<std::mutex> TcpConnection::lock() {
  if (thread_wake_fd_ < 0) return {};
  return mu_.executor();
}

Status TcpConnection::enable_thread(int thread_wake_fd) {
  notify_fd_ = net::Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!notify_fd_.valid()) return system_error(errno, who() + ": eventfd");
  thread_wake_fd_ = thread_wake_fd;
  return Status::ok();
}

void TcpConnection::wake_thread() {
  if (thread_wake_fd_ < 0) return;
  std::uint64_t one = 1;
  (void)!::write(thread_wake_fd_, &one, sizeof one);
}

// The eventfd is written before the flag is set, so a test() that sees the flag finds the count
// to drain; the completion itself was recorded under the lock before either.
void TcpConnection::notify_executor() {
  std::uint64_t one = 1;
  (void)!::write(notify_fd_.get(), &one, sizeof one);
  notified_.store(true, std::memory_order_release);
}

bool TcpConnection::thread_poll_fds(std::vector<pollfd>& fds) {
  auto lk = mu_.helper();
  if (!broken_.is_ok()) return false;
  bool now = false;
  for (const Socket& s : sockets_) {
    short events = 0;
    if (!s.sendq.empty()) events |= POLLOUT;
    if (!s.recvq.empty()) events |= POLLIN;
    if (!s.recvq.empty() && s.stage_begin < s.stage_end) now = true;
    if (events != 0) fds.push_back({s.fd.get(), events, 0});
  }
  return now;
}

void TcpConnection::thread_progress() {
  bool tell = false;
  {
    auto lk = mu_.helper();
    if (!broken_.is_ok()) return;
    const std::uint64_t before = completions_;
    Status st;
    for (Socket& s : sockets_) {
      if (st.is_ok() && !s.sendq.empty()) st = progress_send(s);
      if (st.is_ok() && !s.recvq.empty()) st = progress_recv(s);
    }
    if (!st.is_ok()) (void)fail(st);
    tell = !st.is_ok() || completions_ != before;
  }
  if (tell) notify_executor();
}

Result<bool> TcpConnection::test(const Request& request) {
  auto lk = lock();
  if (thread_wake_fd_ >= 0) {
    // Under the lock every completion notified so far is visible: the wake-up can go.
    if (notified_.exchange(false, std::memory_order_acquire)) {
      std::uint64_t v = 0;
      (void)!::read(notify_fd_.get(), &v, sizeof v);
    }
  }
  LOOM_ASSIGN_OR_RETURN(Op * found, ops_.find(request, [this] { return who(); }));
  Op& op = *found;
  if (!op.complete) {
    if (!broken_.is_ok()) return broken_;
    for (std::size_t i = 0; i < op.nparts && !op.complete; ++i) {
      const Part& p = op.parts[i];
      if (p.header_done == kHeader && p.done == p.len) continue;
      Socket& s = sockets_[p.socket];
      Status st = op.is_send ? progress_send(s) : progress_recv(s);
      if (!st.is_ok()) return fail(st);
    }
  }
  if (!op.complete) return false;
  ops_.release(op);
  return true;
}

void TcpConnection::part_done(Part& p) {
  if (--p.op->parts_left == 0) {
    p.op->complete = true;
    ++completions_;
  }
}

// Writes as much of the queued parts as the socket takes, several per sendmsg.
Status TcpConnection::progress_send(Socket& s) {
  while (!s.sendq.empty()) {
    std::array<iovec, 2 * kMaxBatch> iov{};
    std::size_t niov = 0;
    for (std::size_t i = 0; i < s.sendq.size() && i < kMaxBatch; ++i) {
      Part* p = s.sendq[i];
      if (p->header_done < kHeader)
        iov[niov++] = {reinterpret_cast<std::uint8_t*>(&p->header) + p->header_done,
                       kHeader - p->header_done};
      if (p->done < p->len) iov[niov++] = {p->data + p->done, p->len - p->done};
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
      Part* p = s.sendq.front();
      std::size_t h = std::min(left, kHeader - p->header_done);
      p->header_done += h;
      left -= h;
      std::size_t d = std::min(left, p->len - p->done);
      p->done += d;
      left -= d;
      if (p->header_done < kHeader || p->done < p->len) break;
      s.sendq.pop_front();
      part_done(*p);
    }
  }
  return Status::ok();
}

// Completes the posted receive parts of one socket in order: staged bytes first; then headers
// and small payloads through the staging buffer (one recv for a header and what follows), large
// payloads straight into the caller's buffer. Each header is checked before its payload.
Status TcpConnection::progress_recv(Socket& s) {
  while (!s.recvq.empty()) {
    Part& p = *s.recvq.front();
    if (p.header_done == kHeader && p.done == p.len) {
      s.recvq.pop_front();
      part_done(p);
      continue;
    }
    if (s.stage_begin < s.stage_end) {
      LOOM_RETURN_IF_ERROR(take_staged(s, p));
      continue;
    }
    if (p.header_done < kHeader || p.len - p.done < kStageBytes) {
      LOOM_ASSIGN_OR_RETURN(bool got, fill_stage(s, p));
      if (!got) return Status::ok();
      continue;
    }
    ssize_t n = ::recv(s.fd.get(), p.data + p.done, p.len - p.done, MSG_DONTWAIT);
    if (n == 0) return closed(p);
    if (n < 0) {
      if (would_block(errno)) return Status::ok();
      return make_error(ErrorCode::PeerFailed, "{}: receiving from rank {} failed: {}", who(),
                        peer_, std::strerror(errno));
    }
    p.done += static_cast<std::size_t>(n);
  }
  return Status::ok();
}

// One recv into the (empty) staging buffer; false when nothing has arrived.
Result<bool> TcpConnection::fill_stage(Socket& s, const Part& p) {
  ssize_t n = ::recv(s.fd.get(), s.stage.get(), kStageBytes, MSG_DONTWAIT);
  if (n == 0) return closed(p);
  if (n < 0) {
    if (would_block(errno)) return false;
    return make_error(ErrorCode::PeerFailed, "{}: receiving from rank {} failed: {}", who(), peer_,
                      std::strerror(errno));
  }
  s.stage_begin = 0;
  s.stage_end = static_cast<std::size_t>(n);
  return true;
}

// Moves staged bytes into the part: the rest of its header (checked once complete, before any
// payload byte is accepted), then payload.
Status TcpConnection::take_staged(Socket& s, Part& p) {
  const std::uint8_t* src = s.stage.get() + s.stage_begin;
  std::size_t avail = s.stage_end - s.stage_begin;
  if (p.header_done < kHeader) {
    std::size_t h = std::min(avail, kHeader - p.header_done);
    std::memcpy(reinterpret_cast<std::uint8_t*>(&p.header) + p.header_done, src, h);
    p.header_done += h;
    src += h;
    avail -= h;
    s.stage_begin += h;
    if (p.header_done == kHeader) LOOM_RETURN_IF_ERROR(check_header(p));
  }
  if (p.header_done == kHeader) {
    std::size_t d = std::min(avail, p.len - p.done);
    if (d > 0) std::memcpy(p.data + p.done, src, d);
    p.done += d;
    s.stage_begin += d;
  }
  if (s.stage_begin == s.stage_end) s.stage_begin = s.stage_end = 0;
  return Status::ok();
}

Status TcpConnection::closed(const Part& p) const {
  return make_error(ErrorCode::PeerFailed,
                    "{}: rank {} closed the connection (exited or failed) while rank {} waited "
                    "for {}",
                    who(), peer_, self_, describe_tag(p.op->expected));
}

Status TcpConnection::check_header(const Part& p) const {
  const Op& op = *p.op;
  const MessageHeader& got = p.header;
  HeaderCheck check = tcp::check_header(got, comm_id_, op.expected, op.len, p.index);
  if (check == HeaderCheck::Corrupt)
    return make_error(ErrorCode::Mismatch,
                      "{}: corrupt or foreign message header from rank {} (magic {:#x}, version "
                      "{}, communicator {:#x}, part {}; expected communicator {:#x}, part {})",
                      who(), peer_, got.magic, got.version, got.comm_id, got.part, comm_id_,
                      p.index);
  if (check == HeaderCheck::Mismatch)
    return mismatched_message(self_, peer_, op.expected, op.len, got.tag, got.length);
  return Status::ok();
}

// With no receive posted, each socket's staged bytes begin at a part's header: the next
// message's first part is on the socket the next receive would use. Reads what has arrived
// into its staging buffer (where the next receive takes it from) until a header is there.
std::optional<Unread> TcpConnection::peek_unread() {
  auto lk = lock();
  if (!broken_.is_ok()) return std::nullopt;
  for (const Socket& s : sockets_)
    if (!s.recvq.empty()) return std::nullopt;
  Socket& s = sockets_[next_recv_socket_ % sockets_.size()];
  if (s.stage_end - s.stage_begin < kHeader) {
    std::memmove(s.stage.get(), s.stage.get() + s.stage_begin, s.stage_end - s.stage_begin);
    s.stage_end -= s.stage_begin;
    s.stage_begin = 0;
    ssize_t n =
        ::recv(s.fd.get(), s.stage.get() + s.stage_end, kStageBytes - s.stage_end, MSG_DONTWAIT);
    if (n > 0) s.stage_end += static_cast<std::size_t>(n);  // EOF and errors: for a receive
    if (s.stage_end < kHeader) return std::nullopt;
  }
  MessageHeader h;
  std::memcpy(&h, s.stage.get() + s.stage_begin, kHeader);
  if (h.magic != kDataMagic || h.version != kWireVersion || h.comm_id != comm_id_)
    return std::nullopt;  // corrupt: the next receive says so
  return Unread{h.tag, h.length};
}

bool TcpConnection::prepare_wait(std::vector<pollfd>& fds) {
  if (thread_wake_fd_ >= 0) {  // the thread watches the sockets and signals completions
    fds.push_back({notify_fd_.get(), POLLIN, 0});
    return true;
  }
  for (const Socket& s : sockets_)
    if (!s.recvq.empty() && s.stage_begin < s.stage_end) return false;  // staged: progress now
  for (const Socket& s : sockets_) {
    short events = 0;
    if (!s.sendq.empty()) events |= POLLOUT;
    if (!s.recvq.empty()) events |= POLLIN;
    if (events != 0) fds.push_back({s.fd.get(), events, 0});
  }
  return true;
}

}  // namespace loom::transport::tcp
