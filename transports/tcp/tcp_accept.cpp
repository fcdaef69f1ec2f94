#include "transports/tcp/tcp_accept.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/socket.hpp"
#include "log/log.hpp"

namespace loom::transport::tcp {
namespace {

using net::would_block;

constexpr int kMaxWarnings = 16;  // dropped connections logged at WARN; the rest at DEBUG
constexpr auto kAcceptBackoff = std::chrono::milliseconds(10);
constexpr int kPollCapMs = 100;

std::span<const std::uint8_t> hello_fields(std::span<const std::uint8_t, kHelloMessageBytes> msg) {
  return msg.first(sizeof(Hello));
}

}  // namespace

std::string check_hello(std::span<const std::uint8_t, kHelloMessageBytes> msg,
                        const crypto::Nonce& challenge, const HelloRules& rules) {
  crypto::Mac got{};
  std::memcpy(got.data(), msg.data() + sizeof(Hello), got.size());
  if (!crypto::mac_equal(got,
                         crypto::prove(rules.secret, kHelloDomain, challenge, hello_fields(msg))))
    return "it failed authentication (wrong job secret, or not a loom rank)";
  Hello h;
  std::memcpy(&h, msg.data(), sizeof h);
  if (h.magic != kHelloMagic || h.version != kWireVersion)
    return fmt::format("its hello has magic {:#x}, version {} (expected {:#x}, {})", h.magic,
                       h.version, kHelloMagic, kWireVersion);
  if (h.comm_id != rules.comm_id)
    return fmt::format("its hello is for communicator {:#x}, not {:#x}", h.comm_id, rules.comm_id);
  if (h.to_rank != rules.rank || h.from_rank < 0 || h.from_rank >= rules.rank)
    return fmt::format("its hello is from rank {} to rank {}", h.from_rank, h.to_rank);
  if (h.nsockets < 1 || h.nsockets > kMaxSockets || h.socket_index >= h.nsockets)
    return fmt::format("its hello announces socket {} of {}", h.socket_index, h.nsockets);
  return {};
}

std::span<const std::uint8_t> HelloExchange::output() const {
  if (challenge_sent_ < challenge_.size())
    return std::span<const std::uint8_t>(challenge_).subspan(challenge_sent_);
  if (state_ == State::Answering)
    return std::span<const std::uint8_t>(answer_).subspan(answer_sent_);
  return {};
}

void HelloExchange::wrote(std::size_t n) {
  if (challenge_sent_ < challenge_.size()) {
    challenge_sent_ = std::min(challenge_.size(), challenge_sent_ + n);
  } else if (state_ == State::Answering) {
    answer_sent_ = std::min(answer_.size(), answer_sent_ + n);
    if (answer_sent_ == answer_.size()) state_ = State::Done;
  }
}

void HelloExchange::read(std::span<const std::uint8_t> in, const HelloRules& rules) {
  if (state_ != State::AwaitHello) return;
  const std::size_t n = std::min(in.size(), wants());
  std::memcpy(msg_.data() + got_, in.data(), n);
  got_ += n;
  if (got_ < msg_.size()) return;
  failure_ = check_hello(msg_, challenge_, rules);
  if (!failure_.empty()) {
    state_ = State::Failed;
    return;
  }
  std::memcpy(&hello_, msg_.data(), sizeof hello_);
  state_ = State::Verified;
}

void HelloExchange::admit(bool yes, const HelloRules& rules, const std::string& why_not) {
  if (state_ != State::Verified) return;
  if (!yes) {
    failure_ = why_not.empty() ? "refused" : why_not;
    state_ = State::Failed;
    return;
  }
  crypto::Nonce theirs{};
  std::memcpy(theirs.data(), msg_.data() + sizeof(Hello) + sizeof(crypto::Mac), theirs.size());
  answer_ = crypto::prove(rules.secret, kAcceptDomain, theirs, hello_fields(msg_));
  state_ = State::Answering;
}

void HelloExchange::fail(std::string why) {
  if (state_ == State::Done || state_ == State::Failed) return;
  failure_ = std::move(why);
  state_ = State::Failed;
}

void HelloAcceptor::drop(const Pending& p, const std::string& why) {
  warn(fmt::format("rank {}: dropped a connection from {}: {}", rules_.rank, p.from, why));
}

// The first kMaxWarnings events at WARN, the rest at DEBUG: a flood must not flood the log.
void HelloAcceptor::warn(const std::string& what) {
  if (warnings_ < kMaxWarnings) {
    LOOM_LOG_WARN(Net, "{}{}", what,
                  ++warnings_ == kMaxWarnings ? " (further ones are logged at DEBUG)" : "");
  } else {
    LOOM_LOG_DEBUG(Net, "{}", what);
  }
}

// Takes every connection the listener holds; beyond kMaxPendingHellos, the oldest unauthenticated
// one goes. Running out of descriptors (EMFILE) also sheds the oldest, and pauses accepting
// briefly (the connection stays in the kernel's queue).
void HelloAcceptor::accept_all(int listener) {
  if (Clock::now() < accept_retry_) return;
  for (;;) {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    net::Fd fd(::accept4(listener, reinterpret_cast<sockaddr*>(&addr), &len,
                         SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd.valid()) {
      const int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK) return;
      if (err == EINTR || err == ECONNABORTED || err == EPROTO) continue;
      warn(fmt::format("rank {}: accepting a tcp connection failed: {}", rules_.rank,
                       std::strerror(err)));
      if ((err == EMFILE || err == ENFILE) && !pending_.empty()) {
        drop(*pending_.front(), "closed to free a descriptor (too many open files)");
        pending_.pop_front();
      }
      accept_retry_ = Clock::now() + kAcceptBackoff;
      return;
    }
    net::SocketAddress from;
    from.storage = addr;
    from.len = len;
    if (pending_.size() >= kMaxPendingHellos) {
      drop(*pending_.front(),
           fmt::format("closed unauthenticated: {} connections are already waiting for their "
                       "hello",
                       kMaxPendingHellos));
      pending_.pop_front();
    }
    pending_.push_back(std::unique_ptr<Pending>(new Pending{std::move(fd), from.to_string(),
                                                            Clock::now() + timeout_,
                                                            HelloExchange(crypto::make_nonce())}));
  }
}

// Writes what is due and reads what the hello still needs, until the socket has no more.
void HelloAcceptor::progress(Pending& p, const std::function<bool(const Hello&)>& admit) {
  HelloExchange& ex = p.exchange;
  bool moved = true;
  while (moved && ex.state() != HelloExchange::State::Done &&
         ex.state() != HelloExchange::State::Failed) {
    moved = false;
    if (auto out = ex.output(); !out.empty()) {
      ssize_t n = ::send(p.fd.get(), out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        ex.wrote(static_cast<std::size_t>(n));
        moved = true;
      } else if (n < 0 && !would_block(errno)) {
        ex.fail(fmt::format("sending failed: {}", std::strerror(errno)));
        return;
      }
    }
    if (ex.wants() > 0) {
      std::array<std::uint8_t, kHelloMessageBytes> buf{};
      ssize_t n = ::recv(p.fd.get(), buf.data(), ex.wants(), MSG_DONTWAIT);
      if (n == 0) {
        ex.fail("it closed the connection before its hello was complete");
        return;
      }
      if (n < 0 && !would_block(errno)) {
        ex.fail(fmt::format("receiving its hello failed: {}", std::strerror(errno)));
        return;
      }
      if (n > 0) {
        ex.read(std::span<const std::uint8_t>(buf.data(), static_cast<std::size_t>(n)), rules_);
        moved = true;
      }
    }
    if (ex.state() == HelloExchange::State::Verified)
      ex.admit(admit(ex.hello()), rules_,
               fmt::format("its hello (rank {}, socket {} of {}) disagrees with the sockets rank "
                           "{} opened before",
                           ex.hello().from_rank, ex.hello().socket_index, ex.hello().nsockets,
                           ex.hello().from_rank));
  }
}

std::vector<AcceptedSocket> HelloAcceptor::step(std::span<const int> listeners,
                                                const std::function<bool(const Hello&)>& admit) {
  for (int listener : listeners) accept_all(listener);
  std::vector<AcceptedSocket> done;
  const Clock::time_point now = Clock::now();
  for (auto it = pending_.begin(); it != pending_.end();) {
    Pending& p = **it;
    // Progress first, expiry second: a hello that arrived while this rank was busy elsewhere
    // (not accepting) counts as in time.
    progress(p, admit);
    const auto state = p.exchange.state();
    if (state == HelloExchange::State::Done) {
      done.push_back({p.exchange.hello(), std::move(p.fd)});
    } else if (state == HelloExchange::State::Failed) {
      drop(p, p.exchange.failure());
    } else if (now >= p.expires) {
      drop(p, fmt::format("no complete hello within {} ms (LOOM_HELLO_TIMEOUT)", timeout_.count()));
    } else {
      ++it;
      continue;
    }
    it = pending_.erase(it);
  }
  return done;
}

void HelloAcceptor::wait(std::span<const int> listeners, Deadline deadline) {
  Deadline until = deadline;
  pollfds_.clear();
  if (Clock::now() >= accept_retry_)
    for (int listener : listeners) pollfds_.push_back({listener, POLLIN, 0});
  else
    until = until.earliest(Deadline(accept_retry_));
  for (const auto& p : pending_) {
    short events = 0;
    if (!p->exchange.output().empty()) events |= POLLOUT;
    if (p->exchange.wants() > 0) events |= POLLIN;
    pollfds_.push_back({p->fd.get(), events, 0});
    until = until.earliest(Deadline(p->expires));
  }
  (void)::poll(pollfds_.data(), pollfds_.size(), until.poll_timeout_ms(kPollCapMs));
}

}  // namespace loom::transport::tcp
