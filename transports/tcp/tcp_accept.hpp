// The accepting side of the tcp transport's handshake (see wire.hpp), for many connections at
// once. Every accepted socket gets its own exchange and its own deadline (LOOM_HELLO_TIMEOUT), and
// all of them progress together, without blocking: an idle or slow connection (a port scanner,
// another job, a stuck client) never delays a real peer's hello queued behind it. A connection
// that fails the handshake or does not finish it in time is closed and logged with its address;
// it is never charged to a rank. At most kMaxPendingHellos connections wait unauthenticated: a
// flood evicts its own oldest members instead of exhausting the process's descriptors.
#pragma once

#include <poll.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/crypto.hpp"
#include "common/deadline.hpp"
#include "common/socket.hpp"
#include "transports/tcp/wire.hpp"

namespace loom::transport::tcp {

/// Connections that may be accepted but not yet authenticated at once.
inline constexpr std::size_t kMaxPendingHellos = 128;

/// What an acceptor holds its connectors to: this job's secret and communicator, and this rank.
struct HelloRules {
  crypto::Secret secret{};
  std::uint64_t comm_id = 0;
  int rank = 0;
};

/// Checks a complete hello message (Hello | proof | the connector's challenge) received after
/// sending `challenge`: the proof first (nothing else is looked at before it holds), then every
/// field. Empty when it passes; otherwise why not (for the log).
std::string check_hello(std::span<const std::uint8_t, kHelloMessageBytes> msg,
                        const crypto::Nonce& challenge, const HelloRules& rules);

/// One connection's handshake on the accepting side, free of I/O (the fuzzer drives it): the
/// challenge goes out, the connector's hello comes in (exactly kHelloMessageBytes, never more),
/// and once it passes check_hello() and the caller admits it, the answer goes out.
class HelloExchange {
 public:
  enum class State { AwaitHello, Verified, Answering, Done, Failed };

  explicit HelloExchange(const crypto::Nonce& challenge) : challenge_(challenge) {}

  [[nodiscard]] State state() const { return state_; }
  /// Bytes due to the socket now (the challenge, later the answer); empty when none.
  [[nodiscard]] std::span<const std::uint8_t> output() const;
  void wrote(std::size_t n);
  /// How many more bytes of the hello to read (0 once it is complete).
  [[nodiscard]] std::size_t wants() const {
    return state_ == State::AwaitHello ? kHelloMessageBytes - got_ : 0;
  }
  /// Feeds bytes read from the socket (at most wants()); once the hello is complete, checks it:
  /// Verified, or Failed with failure() saying why.
  void read(std::span<const std::uint8_t> in, const HelloRules& rules);
  /// The caller's decision on a Verified hello: answer it (Answering), or refuse it (Failed).
  void admit(bool yes, const HelloRules& rules, const std::string& why_not = {});
  /// The socket failed (closed, reset): Failed with `why`, unless already Done.
  void fail(std::string why);
  /// The checked hello (valid from Verified on).
  [[nodiscard]] const Hello& hello() const { return hello_; }
  [[nodiscard]] const std::string& failure() const { return failure_; }

 private:
  crypto::Nonce challenge_;
  State state_ = State::AwaitHello;
  std::size_t challenge_sent_ = 0;
  std::array<std::uint8_t, kHelloMessageBytes> msg_{};
  std::size_t got_ = 0;
  crypto::Mac answer_{};
  std::size_t answer_sent_ = 0;
  Hello hello_{};
  std::string failure_;
};

/// An authenticated, answered socket and the hello it came with.
struct AcceptedSocket {
  Hello hello;
  net::Fd fd;
};

/// The unauthenticated connections of a rank's listeners and their handshakes.
class HelloAcceptor {
 public:
  HelloAcceptor(HelloRules rules, std::chrono::milliseconds timeout)
      : rules_(rules), timeout_(timeout) {}

  /// Accepts every connection waiting on the `listeners` (non-blocking; one per rail), moves each
  /// handshake as far as its socket allows, then drops those that failed or whose time is up.
  /// `admit` decides on each verified hello (false: dropped). Returns the sockets whose handshake
  /// completed.
  std::vector<AcceptedSocket> step(std::span<const int> listeners,
                                   const std::function<bool(const Hello&)>& admit);
  std::vector<AcceptedSocket> step(int listener, const std::function<bool(const Hello&)>& admit) {
    return step(std::span<const int>(&listener, 1), admit);
  }
  /// Sleeps until a listener or a handshake can move, a handshake's time is up, or `deadline`
  /// (at most 100 ms).
  void wait(std::span<const int> listeners, Deadline deadline);
  void wait(int listener, Deadline deadline) { wait(std::span<const int>(&listener, 1), deadline); }
  /// Connections being authenticated now.
  [[nodiscard]] std::size_t pending() const { return pending_.size(); }

 private:
  struct Pending {
    net::Fd fd;
    std::string from;
    Clock::time_point expires;
    HelloExchange exchange;
  };
  void accept_all(int listener);
  void progress(Pending& p, const std::function<bool(const Hello&)>& admit);
  void drop(const Pending& p, const std::string& why);
  void warn(const std::string& what);

  HelloRules rules_;
  std::chrono::milliseconds timeout_;
  std::deque<std::unique_ptr<Pending>> pending_;  // oldest first
  std::vector<pollfd> pollfds_;
  int warnings_ = 0;
  Clock::time_point accept_retry_{};  // after EMFILE and the like: when to try accept again
};

}  // namespace loom::transport::tcp
