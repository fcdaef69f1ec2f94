// TcpStoreServer: one background thread runs a poll() loop over the listening socket, an eventfd
// (shutdown) and every client. All sockets are non-blocking; each client has an input buffer
// parsed frame by frame and an output buffer flushed as the socket allows. A GET for a missing
// key is parked (the client is not read from meanwhile) until a SET/ADD of the key or its
// timeout, which the loop tracks as the poll() timeout.
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <map>
#include <string>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <vector>

#include "bootstrap/tcp_store.hpp"
#include "bootstrap/tcp_store_wire.hpp"
#include "log/log.hpp"

namespace loom::bootstrap {
namespace {

using std::chrono::milliseconds;

constexpr std::size_t kReadChunk = std::size_t{64} * 1024;
constexpr std::size_t kReadBudget =
    std::size_t{4} * 1024 * 1024;          // per client per loop iteration (fairness)
constexpr milliseconds kAcceptPause{100};  // after EMFILE/ENFILE
// A client that does not read its responses stops being served (and read) above this backlog.
constexpr std::size_t kMaxOutBacklog = std::size_t{80} << 20;

struct Conn {
  std::uint64_t id = 0;
  net::Fd fd;
  std::string peer;
  bool hello_done = false;
  crypto::Nonce nonce{};  // the challenge this client must answer
  int rank = -1;
  bool dead = false;
  std::vector<std::uint8_t> in;
  std::size_t in_pos = 0;
  std::vector<std::uint8_t> out;
  std::size_t out_pos = 0;
  bool parked = false;
  std::string parked_key;
  Clock::time_point parked_until;

  [[nodiscard]] bool wants_input() const {
    return !dead && !parked && out.size() - out_pos < kMaxOutBacklog;
  }
  [[nodiscard]] std::string who() const {
    return rank >= 0 ? fmt::format("rank {} at {}", rank, peer) : peer;
  }
};

class Loop {
 public:
  Loop(net::Fd listen_fd, net::Fd wake_fd, std::uint64_t comm_id, std::string addr,
       const crypto::Secret& secret)
      : listen_(std::move(listen_fd)),
        wake_(std::move(wake_fd)),
        comm_id_(comm_id),
        secret_(secret),
        addr_(std::move(addr)) {}

  void run();
  [[nodiscard]] int wake_fd() const { return wake_.get(); }
  /// Closes every client socket (after the thread has stopped).
  void close_all() {
    conns_.clear();
    listen_.reset();
  }

 private:
  int poll_timeout_ms() const;
  void accept_all();
  void on_ready(Conn& c, short revents);
  void read_input(Conn& c);
  void process_input(Conn& c);
  bool handle_hello(Conn& c);
  void dispatch(Conn& c, const wire::RequestHeader& h, std::string key,
                std::span<const std::uint8_t> value);
  void handle_get(Conn& c, const wire::RequestHeader& h, std::string key);
  void respond(Conn& c, wire::Reply r, std::uint64_t arg, std::span<const std::uint8_t> payload);
  void flush(Conn& c);
  void wake_waiters(const std::string& key);
  void unpark(Conn& c);
  void expire_parked();
  void drop(Conn& c, const std::string& why, bool warn);
  void drain_runnable();
  void sweep();
  void say_goodbye();

  net::Fd listen_;
  net::Fd wake_;
  std::uint64_t comm_id_;
  crypto::Secret secret_;
  std::string addr_;
  std::uint64_t next_id_ = 1;
  Clock::time_point accept_paused_until_{};
  std::unordered_map<std::uint64_t, std::unique_ptr<Conn>> conns_;
  std::map<std::string, std::vector<std::uint64_t>> waiters_;  // key -> parked client ids
  std::vector<std::uint64_t> runnable_;  // unparked clients that may have buffered requests
  std::map<std::string, Bytes> data_;
};

void Loop::run() {
  std::vector<pollfd> fds;
  std::vector<std::uint64_t> ids;
  for (;;) {
    fds.clear();
    ids.clear();
    fds.push_back({wake_.get(), POLLIN, 0});
    const bool accepting = Clock::now() >= accept_paused_until_;
    fds.push_back({accepting ? listen_.get() : -1, POLLIN, 0});
    for (auto& [id, c] : conns_) {
      short ev = c->wants_input() ? static_cast<short>(POLLIN | POLLRDHUP) : POLLRDHUP;
      if (c->out_pos < c->out.size()) ev = static_cast<short>(ev | POLLOUT);
      fds.push_back({c->fd.get(), ev, 0});
      ids.push_back(id);
    }
    int n = ::poll(fds.data(), fds.size(), poll_timeout_ms());
    if (n < 0 && errno != EINTR) {
      LOOM_LOG_ERROR(Bootstrap, "rendezvous server at {}: poll failed: {}; shutting down", addr_,
                     std::strerror(errno));
      close_all();  // clients see the server gone instead of waiting for their deadlines
      return;
    }
    if (n > 0 && fds[0].revents != 0) {  // shutdown requested
      say_goodbye();
      return;
    }
    if (n > 0 && fds[1].revents != 0) accept_all();
    for (std::size_t i = 0; n > 0 && i < ids.size(); ++i) {
      short rev = fds[i + 2].revents;
      auto it = conns_.find(ids[i]);
      if (rev != 0 && it != conns_.end() && !it->second->dead) on_ready(*it->second, rev);
      drain_runnable();
    }
    expire_parked();
    drain_runnable();
    sweep();
  }
}

int Loop::poll_timeout_ms() const {
  auto earliest = Clock::time_point::max();
  for (const auto& [id, c] : conns_) {
    if (c->parked && c->parked_until < earliest) earliest = c->parked_until;
  }
  if (Clock::now() < accept_paused_until_ && accept_paused_until_ < earliest) {
    earliest = accept_paused_until_;
  }
  if (earliest == Clock::time_point::max()) return -1;
  auto left = std::chrono::ceil<milliseconds>(earliest - Clock::now()).count();
  if (left <= 0) return 0;
  return left > INT_MAX ? INT_MAX : static_cast<int>(left);
}

void Loop::accept_all() {
  for (;;) {
    net::SocketAddress peer;
    peer.len = sizeof peer.storage;
    net::Fd fd(::accept4(listen_.get(), peer.raw(), &peer.len, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!fd.valid()) {
      int err = errno;
      if (err == EINTR || err == ECONNABORTED) continue;
      if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
        LOOM_LOG_WARN(Bootstrap, "rendezvous server at {}: accept: {} (pausing for {} ms)", addr_,
                      std::strerror(err), kAcceptPause.count());
        accept_paused_until_ = Clock::now() + kAcceptPause;
      } else if (err != EAGAIN && err != EWOULDBLOCK) {
        LOOM_LOG_WARN(Bootstrap, "rendezvous server at {}: accept: {}", addr_, std::strerror(err));
      }
      return;
    }
    (void)net::set_nodelay(fd.get());
    auto c = std::make_unique<Conn>();
    c->id = next_id_++;
    c->fd = std::move(fd);
    c->peer = peer.to_string();
    c->nonce = crypto::make_nonce();
    auto challenge = wire::encode_challenge(c->nonce);
    c->out.insert(c->out.end(), challenge.begin(), challenge.end());
    LOOM_LOG_DEBUG(Bootstrap, "rendezvous server at {}: connection from {}", addr_, c->peer);
    conns_.emplace(c->id, std::move(c));
  }
}

void Loop::on_ready(Conn& c, short revents) {
  if ((revents & POLLOUT) != 0) {
    flush(c);
    runnable_.push_back(c.id);  // a drained backlog may unblock buffered requests
  }
  if (c.dead) return;
  if ((revents & POLLIN) != 0) {
    read_input(c);
    if (!c.dead) process_input(c);
    return;
  }
  if ((revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0) {
    drop(c, "closed the connection", false);
  }
}

void Loop::read_input(Conn& c) {
  std::size_t budget = kReadBudget;
  while (budget > 0) {
    std::size_t old = c.in.size();
    c.in.resize(old + kReadChunk);
    ssize_t n = ::recv(c.fd.get(), c.in.data() + old, kReadChunk, 0);
    c.in.resize(old + (n > 0 ? static_cast<std::size_t>(n) : 0));
    if (n > 0) {
      budget -= std::min(budget, static_cast<std::size_t>(n));
      continue;
    }
    if (n == 0) {
      // Complete requests before the EOF are still served: they cannot be answered, though,
      // so the connection is simply dropped.
      drop(c, "closed the connection", false);
      return;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      drop(c, fmt::format("read failed: {}", std::strerror(errno)), false);
    }
    return;
  }
}

void Loop::process_input(Conn& c) {
  while (c.wants_input()) {
    const std::size_t avail = c.in.size() - c.in_pos;
    const std::uint8_t* p = c.in.data() + c.in_pos;
    if (!c.hello_done) {
      if (avail < wire::kHelloBytes || !handle_hello(c)) break;
      continue;
    }
    if (avail < wire::kRequestHeaderBytes) break;
    const wire::RequestHeader h = wire::decode_request(p);
    if (auto why = wire::validate_request(h); !why.empty()) {
      drop(c,
           fmt::format("sent an invalid request ({}: op {}, key length {}, arg {})", why, h.op,
                       h.key_len, h.arg),
           true);
      return;
    }
    const std::size_t value_len = h.op == static_cast<std::uint8_t>(wire::Op::Set) ? h.arg : 0;
    const std::size_t need = wire::kRequestHeaderBytes + h.key_len + value_len;
    if (avail < need) {
      c.in.reserve(c.in_pos + need);
      break;
    }
    const std::uint8_t* key_p = p + wire::kRequestHeaderBytes;
    std::string key(reinterpret_cast<const char*>(key_p), h.key_len);
    c.in_pos += need;
    dispatch(c, h, std::move(key), std::span(key_p + h.key_len, value_len));
  }
  if (c.in_pos == c.in.size()) {
    c.in.clear();
    c.in_pos = 0;
  } else if (c.in_pos >= kReadChunk) {
    c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(c.in_pos));
    c.in_pos = 0;
  }
}

// Returns false when the client was dropped.
bool Loop::handle_hello(Conn& c) {
  const std::uint8_t* raw = c.in.data() + c.in_pos;
  const wire::Hello h = wire::decode_hello(raw);
  c.in_pos += wire::kHelloBytes;
  crypto::Mac proof{};
  std::copy_n(raw + wire::kHelloFieldBytes, proof.size(), proof.begin());
  if (!crypto::mac_equal(proof, crypto::prove(secret_, wire::kHelloDomain, c.nonce,
                                              std::span(raw, wire::kHelloFieldBytes)))) {
    drop(c, "failed authentication (wrong job secret, or not a loom rank)", true);
    return false;
  }
  if (h.magic != wire::kMagic || h.reserved != 0 || h.rank < 0) {
    drop(c, "sent garbage instead of a hello", true);
    return false;
  }
  if (h.version != wire::kVersion) {
    auto ack = wire::encode_ack(wire::AckStatus::BadVersion);
    (void)::send(c.fd.get(), ack.data(), ack.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    drop(c, fmt::format("speaks protocol version {} (server: {})", h.version, wire::kVersion),
         true);
    return false;
  }
  if (h.comm_id != comm_id_) {
    auto ack = wire::encode_ack(wire::AckStatus::WrongCommId);
    (void)::send(c.fd.get(), ack.data(), ack.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    drop(c,
         fmt::format("(rank {}) presented communicator id {:#x}, expected {:#x}", h.rank, h.comm_id,
                     comm_id_),
         true);
    return false;
  }
  c.hello_done = true;
  c.rank = h.rank;
  LOOM_LOG_DEBUG(Bootstrap, "rendezvous server at {}: rank {} joined from {}", addr_, c.rank,
                 c.peer);
  auto ack = wire::encode_ack(wire::AckStatus::Ok);
  c.out.insert(c.out.end(), ack.begin(), ack.end());
  crypto::Nonce theirs{};
  std::copy_n(raw + wire::kHelloFieldBytes + proof.size(), theirs.size(), theirs.begin());
  const crypto::Mac mine =
      crypto::prove(secret_, wire::kServerDomain, theirs, std::span(raw, wire::kHelloFieldBytes));
  c.out.insert(c.out.end(), mine.begin(), mine.end());
  flush(c);
  return !c.dead;
}

void Loop::dispatch(Conn& c, const wire::RequestHeader& h, std::string key,
                    std::span<const std::uint8_t> value) {
  switch (static_cast<wire::Op>(h.op)) {
    case wire::Op::Set:
      data_[key].assign(value.begin(), value.end());
      respond(c, wire::Reply::Ok, 0, {});
      wake_waiters(key);
      return;
    case wire::Op::Add: {
      auto it = data_.find(key);
      auto sum = counter_add(it == data_.end() ? nullptr : &it->second,
                             static_cast<std::int64_t>(h.arg), key);
      if (!sum.is_ok()) {
        const std::string msg = sum.status().message();
        respond(c, wire::Reply::Error, msg.size(),
                std::span(reinterpret_cast<const std::uint8_t*>(msg.data()), msg.size()));
        return;
      }
      data_[key] = format_counter(sum.value());
      respond(c, wire::Reply::Ok, static_cast<std::uint64_t>(sum.value()), {});
      wake_waiters(key);
      return;
    }
    case wire::Op::Get: handle_get(c, h, std::move(key)); return;
  }
}

void Loop::handle_get(Conn& c, const wire::RequestHeader& h, std::string key) {
  if (auto it = data_.find(key); it != data_.end()) {
    respond(c, wire::Reply::Ok, it->second.size(), it->second);
    return;
  }
  if (h.arg == 0) {
    respond(c, wire::Reply::Timeout, 0, {});
    return;
  }
  // Waits longer than ~10 years are "forever" (and cannot overflow the clock).
  constexpr std::uint64_t kForeverMs = 10ull * 365 * 24 * 3600 * 1000;
  c.parked = true;
  c.parked_until = h.arg >= kForeverMs
                       ? Clock::time_point::max()
                       : Clock::now() + milliseconds(static_cast<std::int64_t>(h.arg));
  waiters_[key].push_back(c.id);
  c.parked_key = std::move(key);
}

void Loop::respond(Conn& c, wire::Reply r, std::uint64_t arg,
                   std::span<const std::uint8_t> payload) {
  auto head = wire::encode_response(r, arg);
  c.out.insert(c.out.end(), head.begin(), head.end());
  c.out.insert(c.out.end(), payload.begin(), payload.end());
  flush(c);
}

void Loop::flush(Conn& c) {
  while (!c.dead && c.out_pos < c.out.size()) {
    ssize_t n = ::send(c.fd.get(), c.out.data() + c.out_pos, c.out.size() - c.out_pos,
                       MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      c.out_pos += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // POLLOUT will resume
    drop(c, fmt::format("write failed: {}", std::strerror(errno)), false);
    return;
  }
  if (c.out_pos == c.out.size()) {
    c.out.clear();
    c.out_pos = 0;
  }
}

void Loop::wake_waiters(const std::string& key) {
  auto node = waiters_.extract(key);
  if (node.empty()) return;
  const Bytes& value = data_[key];
  for (std::uint64_t id : node.mapped()) {
    auto it = conns_.find(id);
    if (it == conns_.end() || it->second->dead || !it->second->parked) continue;
    Conn& w = *it->second;
    w.parked = false;
    w.parked_key.clear();
    respond(w, wire::Reply::Ok, value.size(), value);
    runnable_.push_back(id);
  }
}

void Loop::unpark(Conn& c) {
  if (!c.parked) return;
  auto it = waiters_.find(c.parked_key);
  if (it != waiters_.end()) {
    std::erase(it->second, c.id);
    if (it->second.empty()) waiters_.erase(it);
  }
  c.parked = false;
  c.parked_key.clear();
}

void Loop::expire_parked() {
  const auto now = Clock::now();
  for (auto& [id, c] : conns_) {
    if (c->dead || !c->parked || c->parked_until > now) continue;
    unpark(*c);
    respond(*c, wire::Reply::Timeout, 0, {});
    runnable_.push_back(id);
  }
}

void Loop::drop(Conn& c, const std::string& why, bool warn) {
  if (c.dead) return;
  if (warn) {
    LOOM_LOG_WARN(Bootstrap, "rendezvous server at {}: dropping client {}: {}", addr_, c.who(),
                  why);
  } else {
    LOOM_LOG_DEBUG(Bootstrap, "rendezvous server at {}: client {} {}", addr_, c.who(), why);
  }
  unpark(c);
  c.dead = true;
  c.fd.reset();
}

void Loop::drain_runnable() {
  while (!runnable_.empty()) {
    std::uint64_t id = runnable_.back();
    runnable_.pop_back();
    auto it = conns_.find(id);
    if (it != conns_.end() && !it->second->dead) process_input(*it->second);
  }
}

// A clean shutdown: every client gets a Closing frame (in place of any pending answer), so it
// can tell this from the server's process dying (the connection ending without it).
void Loop::say_goodbye() {
  for (auto& [id, c] : conns_) {
    if (c->dead || !c->hello_done) continue;
    unpark(*c);
    respond(*c, wire::Reply::Closing, 0, {});  // best effort: the socket buffer is nearly empty
    if (!c->dead) (void)::shutdown(c->fd.get(), SHUT_WR);
  }
}

void Loop::sweep() {
  std::erase_if(conns_, [](const auto& kv) { return kv.second->dead; });
}

}  // namespace

struct TcpStoreServer::Impl {
  net::SocketAddress address;
  std::unique_ptr<Loop> loop;
  std::thread thread;
};

Result<std::unique_ptr<TcpStoreServer>> TcpStoreServer::start(const net::SocketAddress& bind_addr,
                                                              std::uint64_t comm_id,
                                                              const crypto::Secret& secret) {
  LOOM_ASSIGN_OR_RETURN(net::Fd listen_fd, net::listen_on(bind_addr));
  return start_on(std::move(listen_fd), comm_id, secret);
}

Result<std::unique_ptr<TcpStoreServer>> TcpStoreServer::start_on(net::Fd listen_fd,
                                                                 std::uint64_t comm_id,
                                                                 const crypto::Secret& secret) {
  auto impl = std::make_unique<Impl>();
  LOOM_ASSIGN_OR_RETURN(impl->address, net::bound_address(listen_fd.get()));
  net::Fd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake.valid()) return system_error(errno, "eventfd");
  const std::string addr = impl->address.to_string();
  impl->loop = std::make_unique<Loop>(std::move(listen_fd), std::move(wake), comm_id, addr, secret);
  try {
    impl->thread = std::thread([loop = impl->loop.get()] { loop->run(); });
  } catch (const std::system_error& e) {
    return make_error(ErrorCode::SystemError, "rendezvous server: cannot start thread: {}",
                      e.what());
  }
  LOOM_LOG_INFO(Bootstrap, "rendezvous server listening on {} (communicator id {:#x})", addr,
                comm_id);
  return std::unique_ptr<TcpStoreServer>(new TcpStoreServer(std::move(impl)));
}

TcpStoreServer::TcpStoreServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

TcpStoreServer::~TcpStoreServer() {
  const std::uint64_t one = 1;
  if (::write(impl_->loop->wake_fd(), &one, sizeof one) < 0) {
    LOOM_LOG_ERROR(Bootstrap, "rendezvous server: cannot wake the server thread: {}",
                   std::strerror(errno));
  }
  if (impl_->thread.joinable()) impl_->thread.join();
  impl_->loop->close_all();
  LOOM_LOG_DEBUG(Bootstrap, "rendezvous server at {} stopped", impl_->address.to_string());
}

const net::SocketAddress& TcpStoreServer::address() const {
  return impl_->address;
}

}  // namespace loom::bootstrap
