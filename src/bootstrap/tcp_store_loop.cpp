// TcpStoreServer's loop: one background thread runs a poll() loop over the listening socket, an
// eventfd (shutdown) and every client. All sockets are non-blocking; each client has an input
// buffer parsed frame by frame and an output buffer flushed as the socket allows. A GET for a
// missing key is parked (the client is not read from meanwhile) until a SET/ADD of the key or
// its timeout, which the loop tracks as the poll() timeout, as it tracks each connection's hello
// deadline.
#include "bootstrap/tcp_store_loop.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "log/log.hpp"

namespace loom::bootstrap::server {
namespace {

constexpr std::size_t kReadChunk = std::size_t{64} * 1024;
constexpr std::size_t kReadBudget =
    std::size_t{4} * 1024 * 1024;          // per client per loop iteration (fairness)
constexpr milliseconds kAcceptPause{100};  // after EMFILE/ENFILE
// A client that does not read its responses stops being served (and read) above this backlog.
constexpr std::size_t kMaxOutBacklog = std::size_t{80} << 20;

}  // namespace

bool Conn::wants_input() const {
  return !dead && !parked && out.size() - out_pos < kMaxOutBacklog;
}

std::string Conn::who() const {
  if (!hello_done) return peer;
  return fmt::format("rank {} (pid {} on {}, from {})", rank, pid, host.empty() ? "?" : host, peer);
}

Loop::Loop(net::Fd listen_fd, net::Fd wake_fd, std::uint64_t comm_id, std::string addr,
           const crypto::Secret& secret, const ServerOptions& options)
    : listen_(std::move(listen_fd)),
      wake_(std::move(wake_fd)),
      comm_id_(comm_id),
      secret_(secret),
      addr_(std::move(addr)),
      options_(options) {}

void Loop::close_all() {
  conns_.clear();
  listen_.reset();
}

std::vector<StoreClientInfo> Loop::clients() const {
  std::lock_guard lk(clients_mu_);
  return clients_;
}

void Loop::set_closing_reason(const std::string& why) {
  std::lock_guard lk(clients_mu_);
  closing_reason_ = why.substr(0, wire::kMaxErrorBytes);
}

void Loop::publish_clients() {
  std::vector<StoreClientInfo> now;
  for (const auto& [id, c] : conns_)
    if (c->hello_done && !c->dead) now.push_back({c->rank, c->pid, c->host});
  std::lock_guard lk(clients_mu_);
  clients_ = std::move(now);
}

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
    expire();
    drain_runnable();
    sweep();
  }
}

int Loop::poll_timeout_ms() const {
  auto earliest = Clock::time_point::max();
  for (const auto& [id, c] : conns_) {
    if (c->parked && c->parked_until < earliest) earliest = c->parked_until;
    if (!c->hello_done && c->accepted + hello_timeout() < earliest)
      earliest = c->accepted + hello_timeout();
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
    c->accepted = Clock::now();
    c->nonce = crypto::make_nonce();
    auto challenge = wire::encode_challenge(c->nonce);
    c->out.insert(c->out.end(), challenge.begin(), challenge.end());
    LOOM_LOG_DEBUG(Bootstrap, "rendezvous server at {}: connection from {}", addr_, c->peer);
    pending_.insert(c->id);
    conns_.emplace(c->id, std::move(c));
    cap_pending();
  }
}

// Beyond max_pending connections in their hello (plus one per member: a whole job may connect
// at once), the oldest goes: a flood of idle connections cannot exhaust the server's
// descriptors, and real ranks answer their challenge at once.
void Loop::cap_pending() {
  const std::size_t cap = options_.max_pending + members();
  while (pending_.size() > cap) {
    auto it = conns_.find(*pending_.begin());
    if (it == conns_.end()) {
      pending_.erase(pending_.begin());
      continue;
    }
    drop(*it->second,
         fmt::format("dropped: more than {} connections have not authenticated yet", cap), true,
         false);
  }
}

std::size_t Loop::members() const {
  constexpr int kMaxMembers = 1 << 20;  // bounds what one member's rank number can raise
  return static_cast<std::size_t>(
      std::min(std::max(options_.members, highest_rank_ + 1), kMaxMembers));
}

milliseconds Loop::hello_timeout() const {
  return options_.hello_timeout + kHelloPerMember * static_cast<std::int64_t>(members());
}

void Loop::forget_pending(const Conn& c) {
  if (!c.hello_done) pending_.erase(c.id);
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
    read_input(c);  // what it sent last (a parked client is not read): a goodbye, perhaps
    drop(c, "closed the connection", false, true);
  }
}

// A client that closes while a get of its is parked sends its goodbye behind that get: the
// goodbye is then the last frame of its unread input.
bool Loop::tail_is_bye(const Conn& c) const {
  static const auto bye = [] {
    auto h = wire::encode_request({static_cast<std::uint8_t>(wire::Op::Bye), 1, 0});
    std::vector<std::uint8_t> b(h.begin(), h.end());
    b.push_back('-');
    return b;
  }();
  const std::size_t unread = c.in.size() - c.in_pos;
  return unread >= bye.size() && std::equal(bye.begin(), bye.end(), c.in.end() - bye.size());
}

void Loop::read_input(Conn& c) {
  std::size_t budget = kReadBudget;
  // Read into one reused buffer: growing the input by a whole chunk per read zero-filled 64 KiB
  // for every request (the failure monitors poll several times a second).
  read_buf_.resize(kReadChunk);
  while (budget > 0) {
    ssize_t n = ::recv(c.fd.get(), read_buf_.data(), kReadChunk, 0);
    if (n > 0) c.in.insert(c.in.end(), read_buf_.begin(), read_buf_.begin() + n);
    if (n > 0) {
      budget -= std::min(budget, static_cast<std::size_t>(n));
      continue;
    }
    if (n == 0) {
      // Complete requests before the EOF (a BYE among them) are still processed; answers to
      // them cannot be delivered, so the connection is dropped after.
      process_input(c);
      drop(c, "closed the connection", false, true);
      return;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      drop(c, fmt::format("read failed: {}", std::strerror(errno)), false, true);
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
           true, false);
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
    drop(c, "failed authentication (wrong job secret, or not a loom rank)", true, false);
    return false;
  }
  if (h.magic != wire::kMagic || h.reserved != 0 || h.rank < 0) {
    drop(c, "sent garbage instead of a hello", true, false);
    return false;
  }
  if (h.version != wire::kVersion) {
    auto ack = wire::encode_ack(wire::AckStatus::BadVersion);
    (void)::send(c.fd.get(), ack.data(), ack.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    drop(c, fmt::format("speaks protocol version {} (server: {})", h.version, wire::kVersion), true,
         false);
    return false;
  }
  if (h.comm_id != comm_id_) {
    auto ack = wire::encode_ack(wire::AckStatus::WrongCommId);
    (void)::send(c.fd.get(), ack.data(), ack.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    drop(c,
         fmt::format("(rank {}) presented communicator id {:#x}, expected {:#x}", h.rank, h.comm_id,
                     comm_id_),
         true, false);
    return false;
  }
  c.rank = h.rank;
  c.pid = h.pid;
  c.host = h.host;
  if (!refuse_duplicate(c)) return false;
  forget_pending(c);
  c.hello_done = true;
  ++served_.hellos;
  highest_rank_ = std::max(highest_rank_, c.rank);
  LOOM_LOG_DEBUG(Bootstrap, "rendezvous server at {}: {} joined", addr_, c.who());
  auto ack = wire::encode_ack(wire::AckStatus::Ok);
  c.out.insert(c.out.end(), ack.begin(), ack.end());
  crypto::Nonce theirs{};
  std::copy_n(raw + wire::kHelloFieldBytes + proof.size(), theirs.size(), theirs.begin());
  const crypto::Mac mine =
      crypto::prove(secret_, wire::kServerDomain, theirs, std::span(raw, wire::kHelloFieldBytes));
  c.out.insert(c.out.end(), mine.begin(), mine.end());
  flush(c);
  publish_clients();
  return !c.dead;
}

// A rank held by a connected client of another process (another job on the same port, or two
// processes launched with one rank) is refused, naming both; the first keeps the rank. Returns
// false when `c` was refused.
bool Loop::refuse_duplicate(Conn& c) {
  for (const auto& [id, o] : conns_) {
    if (o.get() == &c || o->dead || !o->hello_done || o->rank != c.rank) continue;
    if (o->pid == c.pid && o->host == c.host) continue;  // the same process (threads as ranks)
    const std::string text = fmt::format(
        "rank {} is already held by pid {} on host {} (connected from {}); pid {} on host {} "
        "(from {}) claims it too: two processes were given the same rank, or another job uses "
        "this rendezvous address",
        c.rank, o->pid, o->host.empty() ? "?" : o->host, o->peer, c.pid,
        c.host.empty() ? "?" : c.host, c.peer);
    auto ack = wire::encode_ack(wire::AckStatus::DuplicateRank);
    std::vector<std::uint8_t> msg(ack.begin(), ack.end());
    const std::size_t n = std::min(text.size(), wire::kMaxRefusalBytes);
    std::uint8_t len[2];
    wire::put_u16(len, static_cast<std::uint16_t>(n));
    msg.insert(msg.end(), len, len + 2);
    msg.insert(msg.end(), text.begin(), text.begin() + static_cast<std::ptrdiff_t>(n));
    (void)::send(c.fd.get(), msg.data(), msg.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    LOOM_LOG_WARN(Bootstrap, "rendezvous server at {}: refused a second claim: {}", addr_, text);
    drop(c, "refused: duplicate rank", false, false);
    return false;
  }
  return true;
}

void Loop::respond(Conn& c, wire::Reply r, std::uint64_t arg,
                   std::span<const std::uint8_t> payload) {
  auto head = wire::encode_response(r, arg);
  served_.bytes_out += head.size() + payload.size();
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
    drop(c, fmt::format("write failed: {}", std::strerror(errno)), false, true);
    return;
  }
  if (c.out_pos == c.out.size()) {
    c.out.clear();
    c.out_pos = 0;
  }
}

// Parked gets past their timeout answer Timeout; connections past their hello deadline go.
void Loop::expire() {
  const auto now = Clock::now();
  for (auto& [id, c] : conns_) {
    if (c->dead) continue;
    if (!c->hello_done && c->accepted + hello_timeout() <= now) {
      drop(*c,
           fmt::format("did not authenticate within {} ms (LOOM_HELLO_TIMEOUT)",
                       hello_timeout().count()),
           true, false);
      continue;
    }
    if (!c->parked || c->parked_until > now) continue;
    std::string missing;
    if (c->parked_gather) {
      auto g = gathers_.find(c->parked_key);
      if (g != gathers_.end()) missing = gather_missing(g->second);
    }
    unpark(*c);
    respond(*c, wire::Reply::Timeout, missing.size(),
            std::span(reinterpret_cast<const std::uint8_t*>(missing.data()), missing.size()));
    runnable_.push_back(id);
  }
}

// `vanished`: the connection ended without the client's goodbye (not a drop decided here).
void Loop::drop(Conn& c, const std::string& why, bool warn, bool vanished) {
  if (c.dead) return;
  if (warn) {
    LOOM_LOG_WARN(Bootstrap, "rendezvous server at {}: dropping client {}: {}", addr_, c.who(),
                  why);
  } else {
    LOOM_LOG_DEBUG(Bootstrap, "rendezvous server at {}: client {} {}", addr_, c.who(), why);
  }
  // A process is gone when its last connection vanishes: another one still open (its watch
  // link, or the main connection of a link abandoned in its hello by an overloaded client) says
  // it lives.
  if (vanished && c.hello_done && !c.said_bye && !tail_is_bye(c) && !has_sibling(c)) {
    LOOM_LOG_INFO(Bootstrap,
                  "rendezvous server at {}: {} went away without a goodbye (its process died, or "
                  "its connection broke)",
                  addr_, c.who());
    note_gone(c);
  }
  unpark(c);
  forget_pending(c);
  c.dead = true;
  c.fd.reset();
  if (c.hello_done) publish_clients();
}

bool Loop::has_sibling(const Conn& c) const {
  for (const auto& [id, o] : conns_)
    if (id != c.id && !o->dead && o->hello_done && o->rank == c.rank && o->pid == c.pid &&
        o->host == c.host)
      return true;
  return false;
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
  std::string why;
  {
    std::lock_guard lk(clients_mu_);
    why = closing_reason_;
  }
  log_served();
  const std::span<const std::uint8_t> reason(reinterpret_cast<const std::uint8_t*>(why.data()),
                                             why.size());
  for (auto& [id, c] : conns_) {
    if (c->dead || !c->hello_done) continue;
    unpark(*c);
    respond(*c, wire::Reply::Closing, why.size(),
            reason);  // best effort: the buffer is nearly empty
    if (!c->dead) (void)::shutdown(c->fd.get(), SHUT_WR);
  }
}

void Loop::sweep() {
  std::erase_if(conns_, [](const auto& kv) { return kv.second->dead; });
}

}  // namespace loom::bootstrap::server
