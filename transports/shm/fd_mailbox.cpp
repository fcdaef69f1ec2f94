#include "transports/shm/fd_mailbox.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "common/socket.hpp"
#include "log/log.hpp"
#include "transports/shm/shm_segment.hpp"

namespace loom::transport::shm {
namespace {

using net::would_block;

constexpr std::size_t kMaxUnread = 64;   // connections whose letter has not come yet
constexpr std::size_t kMaxStashed = 64;  // descriptors waiting for their receive()
constexpr auto kUnreadTimeout = std::chrono::seconds(5);
constexpr auto kCheckEvery = std::chrono::milliseconds(100);

}  // namespace

Result<std::unique_ptr<FdMailbox>> FdMailbox::open(std::uint64_t comm_id, int rank) {
  LOOM_ASSIGN_OR_RETURN(std::string nonce, random_hex(16));
  std::string name = fmt::format("loom-{:016x}-{}-{}-fd", comm_id, rank, nonce);
  LOOM_ASSIGN_OR_RETURN(DoorbellAddress addr, DoorbellAddress::from_name(name));
  net::Fd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return system_error(errno, "shared-memory mailbox socket");
  if (::bind(fd.get(), addr.raw(), addr.len()) != 0)
    return system_error(errno, "binding shared-memory mailbox @" + name);
  if (::listen(fd.get(), SOMAXCONN) != 0)
    return system_error(errno, "listening on shared-memory mailbox @" + name);
  return std::unique_ptr<FdMailbox>(new FdMailbox(std::move(fd), std::move(name), comm_id, rank));
}

Status FdMailbox::send(const DoorbellAddress& to, const Letter& letter, int fd, Deadline deadline) {
  const int peer = letter.to_rank;
  net::Fd s(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s.valid()) return system_error(errno, "shared-memory mailbox socket");
  auto nap = std::chrono::microseconds(100);
  while (::connect(s.get(), to.raw(), to.len()) != 0) {
    const int err = errno;
    if (err == ECONNREFUSED || err == ENOENT)
      return make_error(ErrorCode::PeerFailed,
                        "rank {}: the shared-memory mailbox of rank {} is gone (it exited?)",
                        letter.from_rank, peer)
          .with_peer(peer);
    if (!would_block(err))
      return system_error(err, fmt::format("rank {}: connecting to the shared-memory mailbox of "
                                           "rank {}",
                                           letter.from_rank, peer));
    if (deadline.expired())
      return make_error(ErrorCode::Timeout,
                        "rank {}: the shared-memory mailbox of rank {} stayed full until the "
                        "deadline",
                        letter.from_rank, peer);
    std::this_thread::sleep_for(nap);  // its queue is full: it empties it whenever it waits
    nap = std::min<std::chrono::microseconds>(2 * nap, std::chrono::milliseconds(10));
  }
  iovec iov{const_cast<Letter*>(&letter), sizeof letter};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  if (::sendmsg(s.get(), &msg, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof letter)) {
    const int err = errno;
    if (err == EPIPE || err == ECONNRESET)
      return make_error(ErrorCode::PeerFailed,
                        "rank {}: rank {} closed its shared-memory mailbox (it exited?)",
                        letter.from_rank, peer)
          .with_peer(peer);
    return system_error(err, fmt::format("rank {}: handing a shared-memory channel to rank {}",
                                         letter.from_rank, peer));
  }
  return Status::ok();
}

// Reads the letter on one accepted connection: true when the connection is done with (a letter
// taken or refused, or the connection failed), false while nothing has arrived.
bool FdMailbox::read_letter(int conn) {
  Letter letter;
  iovec iov{&letter, sizeof letter};
  alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n = ::recvmsg(conn, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  if (n < 0 && would_block(errno)) return false;
  std::vector<net::Fd> fds;  // closed unless kept
  if (n >= 0)
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (std::size_t i = 0; i < count; ++i) {
        int fd = -1;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        fds.emplace_back(fd);
      }
    }
  ucred cred{};
  socklen_t len = sizeof cred;
  const bool ok = n == static_cast<ssize_t>(sizeof letter) &&
                  (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) == 0 && fds.size() == 1 &&
                  ::getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 &&
                  cred.uid == ::geteuid() && letter.magic == Letter::kMagic &&
                  letter.comm_id == comm_id_ && letter.to_rank == rank_ && letter.from_rank >= 0;
  if (!ok) {
    if (n != 0)
      LOOM_LOG_WARN(Shm,
                    "rank {}: ignored a connection to its shared-memory mailbox that did not "
                    "bring a channel of this communicator (pid {}, uid {})",
                    rank_, cred.pid, cred.uid);
    return true;
  }
  stash_.push_back({cred.pid, letter, std::move(fds[0])});
  if (stash_.size() > kMaxStashed) stash_.pop_front();
  return true;
}

// Accepts what the mailbox holds and reads every letter that has arrived.
void FdMailbox::collect() {
  for (;;) {
    net::Fd c(::accept4(fd_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!c.valid()) break;
    unread_.push_back({std::move(c), Clock::now() + kUnreadTimeout});
    if (unread_.size() > kMaxUnread) unread_.pop_front();
  }
  const auto now = Clock::now();
  for (auto it = unread_.begin(); it != unread_.end();)
    it = read_letter(it->fd.get()) || now >= it->expires ? unread_.erase(it) : it + 1;
}

void FdMailbox::wait(Deadline until) {
  std::vector<pollfd> fds{{fd_.get(), POLLIN, 0}};
  for (const Unread& u : unread_) fds.push_back({u.fd.get(), POLLIN, 0});
  (void)::poll(fds.data(), fds.size(), until.poll_timeout_ms(100));
}

Result<net::Fd> FdMailbox::receive(int from, pid_t pid, const std::array<char, 32>& nonce,
                                   Deadline deadline, const std::function<Status()>& check) {
  for (;;) {
    collect();
    auto it = std::find_if(stash_.begin(), stash_.end(), [&](const Stashed& s) {
      return s.letter.from_rank == from && s.pid == pid && s.letter.nonce == nonce;
    });
    if (it != stash_.end()) {
      net::Fd fd = std::move(it->fd);
      stash_.erase(it);
      return fd;
    }
    if (deadline.expired())
      return make_error(ErrorCode::Timeout,
                        "rank {}: timed out waiting for rank {} to hand over its shared-memory "
                        "channel",
                        rank_, from);
    if (check) LOOM_RETURN_IF_ERROR(check());
    wait(deadline.earliest(Deadline::after(kCheckEvery)));
  }
}

}  // namespace loom::transport::shm
