// TcpStoreClient: blocking request/response over one socket, serialised by a mutex. See
// tcp_store.hpp for the behaviour after timeouts and server failure.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "bootstrap/tcp_store.hpp"
#include "bootstrap/tcp_store_wire.hpp"
#include "log/log.hpp"

namespace loom::bootstrap {
namespace {

using std::chrono::milliseconds;

// How long past its deadline a get() waits for the server's own Timeout reply before deciding
// that the server is unresponsive.
constexpr milliseconds kServerGrace{1000};
constexpr milliseconds kDefaultOpTimeout{600'000};
constexpr milliseconds kWatchGrace{30'000};
// Reconnections after a lost sync or a busy server: backoff doubling within these bounds.
constexpr milliseconds kMinBackoff{50};
constexpr milliseconds kMaxBackoff{2000};

// A server that closes a connection during its hello is shedding load (its pending-hello cap or
// hello deadline on an overloaded host): busy, not gone.
bool busy_hello(const Status& s) {
  return s.code() == ErrorCode::PeerFailed &&
         s.message().find("during the hello") != std::string::npos;
}

milliseconds jittered(milliseconds backoff) {
  thread_local std::minstd_rand jitter(std::random_device{}());
  const auto half = backoff.count() / 2;
  return milliseconds(half + static_cast<long>(jitter() % (half + 1)));
}

// Waits until `fd` has input (or an error/hangup to read) or `d` passes. False on timeout.
bool wait_input(int fd, Deadline d) {
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    const int rc = ::poll(&p, 1, d.poll_timeout_ms(100));
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) return true;  // the read that follows reports the error
    if (rc == 0 && d.expired()) return false;
  }
}

std::uint64_t wait_ms(Deadline d) {
  if (d.at() == Clock::time_point::max()) return wire::kWaitForever;
  auto left = std::chrono::ceil<milliseconds>(d.at() - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<std::uint64_t>(left);
}

Deadline extend(Deadline d, milliseconds grace) {
  if (d.at() > Clock::time_point::max() - grace) return Deadline::never();
  return Deadline(d.at() + grace);
}

Status check_key(const std::string& key, std::size_t value_len) {
  if (key.empty() || key.size() > wire::kMaxKeyBytes) {
    return make_error(ErrorCode::InvalidArgument, "store key of {} bytes (must be 1 to {})",
                      key.size(), wire::kMaxKeyBytes);
  }
  if (value_len > wire::kMaxValueBytes) {
    return make_error(ErrorCode::InvalidArgument,
                      "store value for '{}' of {} bytes exceeds the limit of {} bytes", key,
                      value_len, wire::kMaxValueBytes);
  }
  return Status::ok();
}

struct Response {
  wire::Reply reply = wire::Reply::Ok;
  std::uint64_t arg = 0;
  Bytes payload;
};

std::string payload_text(const Bytes& b) {
  return {b.begin(), b.end()};
}

}  // namespace

struct TcpStoreClient::Impl {
  net::SocketAddress server;
  std::string server_name;
  std::uint64_t comm_id = 0;
  int rank = 0;
  crypto::Secret secret{};
  std::mutex mu;
  net::Fd fd;                 // invalid after an out-of-sync timeout: the next call reconnects
  std::deque<wire::Op> owed;  // requests sent on fd whose late answers are still to be skipped
  milliseconds backoff{0};    // before the next reconnection (0: none failed since the last)
  Clock::time_point reconnect_at{};
  std::atomic<std::uint64_t> reconnects{0};
  Status broken;               // the server closed the connection: every later call fails with this
  bool server_left = false;    // ... after saying Closing (a clean shutdown)
  std::string closing_reason;  // ... and why, when its owner said
  std::atomic<bool> lost{false};  // ... without saying Closing (read without the mutex)
  std::atomic<milliseconds::rep> op_timeout_ms{kDefaultOpTimeout.count()};
  std::atomic<int> live_fd{-1};  // fd's number, for interrupt() (read without the mutex)
  std::atomic<bool> interrupted{false};

  [[nodiscard]] Deadline op_deadline() const {
    return Deadline::after(milliseconds(op_timeout_ms.load(std::memory_order_relaxed)));
  }

  Status handshake(Deadline deadline);
  void reset_fd() {
    live_fd = -1;
    fd.reset();
    owed.clear();
    delay_reconnect();
  }
  /// The next reconnection waits a backoff (doubling, with jitter), so that many clients of a
  /// slow server do not all hello again at once.
  void delay_reconnect() {
    backoff = std::clamp(backoff * 2, kMinBackoff, kMaxBackoff);
    reconnect_at = Clock::now() + jittered(backoff);
  }
  Status reconnect(Deadline deadline, const std::string& what);
  Result<Response> answer(Deadline deadline, const std::string& what);
  Result<Response> call(wire::Op op, const std::string& key, std::uint64_t arg,
                        std::span<const std::uint8_t> value, Deadline send_deadline,
                        Deadline reply_deadline, const std::string& what);
  Status send_request(wire::Op op, const std::string& key, std::uint64_t arg,
                      std::span<const std::uint8_t> value, Deadline deadline,
                      const std::string& what);
  Result<Response> recv_response(wire::Op op, Deadline deadline, const std::string& what);
  Status fail(const Status& s, const std::string& what);
  /// Sends BYE (best effort, bounded) so the server does not list this client as gone. Called
  /// with `mu` held.
  void say_bye();
  /// The goodbye frame written straight to the socket, for a client whose call holds `mu` at
  /// process exit: blocked waiting for an answer, it sends nothing meanwhile, and the server
  /// finds the goodbye at the end of its unread input when the connection closes.
  void say_bye_unlocked();
  Status read_refusal(int sock, const std::string& ctx) const;
  Status check_server_proof(int sock, const crypto::Nonce& mine,
                            std::span<const std::uint8_t> fields, Deadline deadline,
                            const std::string& ctx) const;
};

// After an Ok ack the server proves it holds the secret too (on our nonce).
Status TcpStoreClient::Impl::check_server_proof(int sock, const crypto::Nonce& mine,
                                                std::span<const std::uint8_t> fields,
                                                Deadline deadline, const std::string& ctx) const {
  crypto::Mac got{};
  Status s = net::recv_all(sock, got.data(), got.size(), deadline, "server proof");
  if (!s.is_ok()) return s.with_context(fmt::format("rank {}: joining the {}", rank, ctx));
  if (!crypto::mac_equal(got, crypto::prove(secret, wire::kServerDomain, mine, fields)))
    return make_error(ErrorCode::PeerFailed,
                      "rank {}: joining the {}: it failed to prove the job's secret (another "
                      "job's server, or an impostor): connection refused",
                      rank, ctx);
  return Status::ok();
}

void TcpStoreClient::Impl::say_bye() {
  if (!fd.valid() || !broken.is_ok()) return;
  static const std::string kKey = "-";
  (void)send_request(wire::Op::Bye, kKey, 0, {}, Deadline::after(milliseconds(200)), "goodbye");
  reset_fd();
}

void TcpStoreClient::Impl::say_bye_unlocked() {
  const int sock = live_fd.load();
  if (sock < 0) return;
  static const auto frame = [] {
    auto h = wire::encode_request({static_cast<std::uint8_t>(wire::Op::Bye), 1, 0});
    std::vector<std::uint8_t> b(h.begin(), h.end());
    b.push_back('-');
    return b;
  }();
  (void)::send(sock, frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

// After a DuplicateRank ack: the server says who holds the rank.
Status TcpStoreClient::Impl::read_refusal(int sock, const std::string& ctx) const {
  std::uint8_t len[2] = {};
  const Deadline d = Deadline::after(milliseconds(2000));
  std::string text = "(no reason given)";
  if (net::recv_all(sock, len, 2, d, "refusal").is_ok()) {
    std::string got(std::min<std::size_t>(wire::get_u16(len), wire::kMaxRefusalBytes), '\0');
    if (net::recv_all(sock, got.data(), got.size(), d, "refusal").is_ok()) text = got;
  }
  return make_error(ErrorCode::InvalidUsage, "rank {}: the {} refused this process: {}", rank, ctx,
                    text);
}

namespace {

// Live clients, told goodbye at a normal process exit (a communicator the program never
// destroyed): the server then does not take that exit for a crash.
struct LiveClients {
  std::mutex mu;
  std::set<TcpStoreClient::Impl*> all;
};

LiveClients& live_clients() {
  static auto* live = [] {
    auto* l = new LiveClients;  // never destroyed: the exit handler may run after statics go
    std::atexit([] {
      std::lock_guard lk(live_clients().mu);
      for (TcpStoreClient::Impl* c : live_clients().all) {
        std::unique_lock held(c->mu, std::defer_lock);
        for (int i = 0; i < 20 && !held.try_lock(); ++i) ::usleep(5000);
        if (held.owns_lock())
          c->say_bye();
        else  // blocked in a call (a parked watch): the goodbye goes behind its request
          c->say_bye_unlocked();
      }
    });
    return l;
  }();
  return *live;
}

}  // namespace

Status TcpStoreClient::Impl::handshake(Deadline deadline) {
  const std::string ctx = "rendezvous server at " + server_name;
  auto connected = net::connect_with_retry(server, deadline);
  if (!connected.is_ok()) return connected.status().with_context(ctx);
  net::Fd sock = std::move(connected).value();
  std::array<std::uint8_t, wire::kChallengeBytes> challenge{};
  Status s = net::recv_all(sock.get(), challenge.data(), challenge.size(), deadline, "challenge");
  if (s.is_ok() && (wire::get_u32(&challenge[0]) != wire::kMagic ||
                    wire::get_u16(&challenge[4]) != wire::kVersion))
    return make_error(ErrorCode::InvalidUsage,
                      "{} is not a loom rendezvous server of this version (bad challenge)", ctx);
  crypto::Nonce nonce{};
  std::copy_n(challenge.begin() + 8, nonce.size(), nonce.begin());
  auto fields = wire::encode_hello({.comm_id = comm_id,
                                    .rank = rank,
                                    .pid = static_cast<std::uint32_t>(::getpid()),
                                    .host = net::host_name()});
  std::array<std::uint8_t, wire::kHelloBytes> hello{};
  std::copy(fields.begin(), fields.end(), hello.begin());
  crypto::Mac proof = crypto::prove(secret, wire::kHelloDomain, nonce, fields);
  std::copy(proof.begin(), proof.end(), hello.begin() + wire::kHelloFieldBytes);
  const crypto::Nonce mine = crypto::make_nonce();
  std::copy(mine.begin(), mine.end(), hello.begin() + wire::kHelloFieldBytes + proof.size());
  std::array<std::uint8_t, wire::kAckBytes> ack{};
  if (s.is_ok()) s = net::send_all(sock.get(), hello.data(), hello.size(), deadline, "hello");
  if (s.is_ok()) s = net::recv_all(sock.get(), ack.data(), ack.size(), deadline, "hello reply");
  if (s.code() == ErrorCode::PeerFailed) {
    return make_error(ErrorCode::PeerFailed,
                      "{} closed the connection during the hello (is it a loom rendezvous "
                      "server?): {}",
                      ctx, s.message());
  }
  if (!s.is_ok()) return s.with_context(ctx);
  if (wire::get_u32(&ack[0]) != wire::kMagic) {
    return make_error(ErrorCode::PeerFailed, "{} sent an invalid hello reply", ctx);
  }
  switch (static_cast<wire::AckStatus>(wire::get_u16(&ack[6]))) {
    case wire::AckStatus::Ok:
      LOOM_RETURN_IF_ERROR(check_server_proof(sock.get(), mine, fields, deadline, ctx));
      fd = std::move(sock);
      live_fd = fd.get();
      LOOM_LOG_DEBUG(Bootstrap, "rank {} connected to the rendezvous server at {}", rank,
                     server_name);
      return Status::ok();
    case wire::AckStatus::WrongCommId:
      return make_error(ErrorCode::InvalidUsage,
                        "{} serves another communicator and rejected communicator id {:#x} "
                        "(do all ranks use the same UniqueId?)",
                        ctx, comm_id);
    case wire::AckStatus::BadVersion:
      return make_error(ErrorCode::InvalidUsage, "{} speaks protocol version {} (ours: {})", ctx,
                        wire::get_u16(&ack[4]), wire::kVersion);
    case wire::AckStatus::DuplicateRank: return read_refusal(sock.get(), ctx);
  }
  return make_error(ErrorCode::PeerFailed, "{} sent an unknown hello status", ctx);
}

Status TcpStoreClient::Impl::fail(const Status& s, const std::string& what) {
  if (interrupted) {  // interrupt() shut the connection down: neither side failed
    reset_fd();
    return make_error(ErrorCode::Aborted, "{}: the store connection was interrupted", what);
  }
  if (s.code() == ErrorCode::Timeout) say_bye();  // out of sync: a reconnect follows, not a death
  reset_fd();
  if (s.code() == ErrorCode::PeerFailed) {
    std::string_view detail = s.message();
    if (detail.starts_with(what + ": ")) detail.remove_prefix(what.size() + 2);
    lost = !server_left;
    if (server_left && !closing_reason.empty())
      broken =
          make_error(ErrorCode::PeerFailed, "rendezvous server at {} shut down: {} (during {})",
                     server_name, closing_reason, what);
    else if (server_left)
      broken = make_error(ErrorCode::PeerFailed,
                          "rendezvous server at {} shut down (its owner finalized; during {})",
                          server_name, what);
    else
      broken = make_error(ErrorCode::PeerFailed,
                          "rendezvous server at {} closed the connection without a shutdown "
                          "(its process died?){}",
                          server_name,
                          detail.starts_with("peer closed the connection")
                              ? fmt::format(" (during {})", what)
                              : fmt::format(" (during {}: {})", what, detail));
    // INFO, not WARN: the error reaches the caller, and at a normal job end rank 0's server
    // closes while other ranks' failure monitors are still waiting on it.
    LOOM_LOG_INFO(Bootstrap, "rank {}: {}", rank, broken.message());
    return broken;
  }
  if (s.code() == ErrorCode::Timeout) {
    LOOM_LOG_WARN(Bootstrap,
                  "rank {}: rendezvous server at {} did not answer {} in time; the connection "
                  "is out of sync and will be re-established by the next call",
                  rank, server_name, what);
    return make_error(ErrorCode::Timeout, "{}: rendezvous server at {} did not answer in time ({})",
                      what, server_name, s.message());
  }
  return s.with_context(what);
}

Status TcpStoreClient::Impl::send_request(wire::Op op, const std::string& key, std::uint64_t arg,
                                          std::span<const std::uint8_t> value, Deadline deadline,
                                          const std::string& what) {
  auto head = wire::encode_request(
      {static_cast<std::uint8_t>(op), static_cast<std::uint32_t>(key.size()), arg});
  Bytes msg(head.begin(), head.end());
  msg.insert(msg.end(), key.begin(), key.end());
  if (value.size() <= 4096) msg.insert(msg.end(), value.begin(), value.end());
  LOOM_RETURN_IF_ERROR(net::send_all(fd.get(), msg.data(), msg.size(), deadline, what));
  if (value.size() > 4096) {
    LOOM_RETURN_IF_ERROR(net::send_all(fd.get(), value.data(), value.size(), deadline, what));
  }
  return Status::ok();
}

Result<Response> TcpStoreClient::Impl::recv_response(wire::Op op, Deadline deadline,
                                                     const std::string& what) {
  std::array<std::uint8_t, wire::kResponseHeaderBytes> head{};
  LOOM_RETURN_IF_ERROR(net::recv_all(fd.get(), head.data(), head.size(), deadline, what));
  const wire::ResponseHeader h = wire::decode_response(head.data());
  Response r{static_cast<wire::Reply>(h.reply), h.arg, {}};
  std::size_t payload = 0;
  bool valid = true;
  switch (r.reply) {
    case wire::Reply::Ok:
      payload = op == wire::Op::Get || op == wire::Op::Gone || op == wire::Op::Gather ? h.arg : 0;
      valid = (op != wire::Op::Get || h.arg <= wire::kMaxValueBytes) &&
              (op != wire::Op::Gone || h.arg <= wire::kMaxGoneBytes) &&
              (op != wire::Op::Gather || h.arg <= wire::kMaxGatherBytes);
      break;
    case wire::Reply::Timeout:
      payload = op == wire::Op::Gather ? h.arg : 0;
      valid = op == wire::Op::Get || op == wire::Op::Watch ||
              (op == wire::Op::Gather && h.arg <= wire::kMaxErrorBytes);
      break;
    case wire::Reply::Closing: {
      server_left = true;
      std::string why(std::min<std::uint64_t>(h.arg, wire::kMaxErrorBytes), '\0');
      if (net::recv_all(fd.get(), why.data(), why.size(), deadline, what).is_ok())
        closing_reason = why;
      return make_error(ErrorCode::PeerFailed, "{}: the server shut down", what);
    }
    case wire::Reply::Error:
      payload = h.arg;
      valid = h.arg <= wire::kMaxErrorBytes;
      break;
    default: valid = false;
  }
  if (!valid) {
    reset_fd();  // out of sync: reconnect on the next call
    return make_error(ErrorCode::Internal,
                      "{}: rendezvous server at {} sent an invalid reply (code {}, arg {})", what,
                      server_name, h.reply, h.arg);
  }
  r.payload.resize(payload);
  LOOM_RETURN_IF_ERROR(net::recv_all(fd.get(), r.payload.data(), payload, deadline, what));
  return r;
}

Result<Response> TcpStoreClient::Impl::call(wire::Op op, const std::string& key, std::uint64_t arg,
                                            std::span<const std::uint8_t> value,
                                            Deadline send_deadline, Deadline reply_deadline,
                                            const std::string& what) {
  LOOM_RETURN_IF_ERROR(check_key(key, value.size()));
  std::lock_guard lock(mu);
  if (!broken.is_ok()) return broken;
  if (interrupted)
    return make_error(ErrorCode::Aborted, "{}: the store connection was interrupted", what);
  if (!fd.valid()) LOOM_RETURN_IF_ERROR(reconnect(send_deadline, what));
  Status sent = send_request(op, key, arg, value, send_deadline, what);
  if (!sent.is_ok()) return fail(sent, what);
  owed.push_back(op);
  return answer(reply_deadline, what);
}

Status TcpStoreClient::Impl::reconnect(Deadline deadline, const std::string& what) {
  if (Clock::now() < reconnect_at) {
    if (deadline.at() < reconnect_at)
      return make_error(
          ErrorCode::Timeout, "{}: rendezvous server at {} is busy (reconnecting in {} ms)", what,
          server_name, std::chrono::ceil<milliseconds>(reconnect_at - Clock::now()).count());
    std::this_thread::sleep_until(reconnect_at);
  }
  reconnects.fetch_add(1, std::memory_order_relaxed);
  Status s = handshake(op_deadline().earliest(deadline));
  if (s.is_ok()) {
    backoff = milliseconds(0);
    return s;
  }
  // A server that proved itself before and now closes a reconnection during its hello is busy,
  // not gone: a later call tries again.
  if (busy_hello(s)) {
    delay_reconnect();
    return make_error(ErrorCode::Timeout, "{}: {} (reconnecting; the server is busy)", what,
                      s.message());
  }
  if (s.code() == ErrorCode::PeerFailed) {
    broken = s;
    lost = true;
  } else {
    delay_reconnect();
  }
  return s.with_context(what);
}

// Reads the answers owed on the connection, in order, skipping the late ones of earlier calls
// that timed out, up to this call's own (the last owed). A server that has sent nothing by
// `deadline` is slow, not out of sync: the connection stays, and this answer joins the owed.
Result<Response> TcpStoreClient::Impl::answer(Deadline deadline, const std::string& what) {
  while (!owed.empty()) {
    if (!wait_input(fd.get(), deadline)) {
      LOOM_LOG_INFO(Bootstrap,
                    "rank {}: rendezvous server at {} has not answered {} in time ({} answer(s) "
                    "pending); the connection is kept",
                    rank, server_name, what, owed.size());
      return make_error(ErrorCode::Timeout,
                        "{}: rendezvous server at {} did not answer in time (busy)", what,
                        server_name);
    }
    const wire::Op next = owed.front();
    auto r = recv_response(next, deadline, what);
    if (!r.is_ok()) {
      if (r.status().code() == ErrorCode::Internal) return r.status();
      return fail(r.status(), what);
    }
    owed.pop_front();
    if (owed.empty()) return r;  // this call's own answer
  }
  return make_error(ErrorCode::Internal, "{}: no answer owed", what);
}

TcpStoreClient::TcpStoreClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {
  LiveClients& live = live_clients();
  std::lock_guard lk(live.mu);
  live.all.insert(impl_.get());
}

TcpStoreClient::~TcpStoreClient() {
  {
    LiveClients& live = live_clients();
    std::lock_guard lk(live.mu);
    live.all.erase(impl_.get());
  }
  std::lock_guard lk(impl_->mu);
  impl_->say_bye();
}

Result<std::unique_ptr<TcpStoreClient>> TcpStoreClient::connect(const net::SocketAddress& server,
                                                                std::uint64_t comm_id, int rank,
                                                                Deadline deadline,
                                                                const crypto::Secret& secret) {
  auto impl = std::make_unique<Impl>();
  impl->server = server;
  impl->server_name = server.to_string();
  impl->comm_id = comm_id;
  impl->rank = rank;
  impl->secret = secret;
  // A busy server's dropped hellos are retried, backing off, until the deadline.
  for (milliseconds backoff = kMinBackoff;; backoff = std::min(backoff * 2, kMaxBackoff)) {
    Status s = impl->handshake(deadline);
    if (s.is_ok()) break;
    const Deadline retry = Deadline::after(jittered(backoff));
    if (!busy_hello(s) || deadline.at() < retry.at()) return s;
    LOOM_LOG_DEBUG(Bootstrap, "rank {}: {}; trying again", rank, s.message());
    std::this_thread::sleep_until(retry.at());
  }
  return std::unique_ptr<TcpStoreClient>(new TcpStoreClient(std::move(impl)));
}

bool TcpStoreClient::server_lost() const {
  return impl_->lost.load();
}

void TcpStoreClient::set_op_timeout(std::chrono::milliseconds timeout) {
  impl_->op_timeout_ms.store(timeout.count(), std::memory_order_relaxed);
}

Status TcpStoreClient::set(const std::string& key, std::span<const std::uint8_t> value) {
  return set_by(key, value, impl_->op_deadline());
}

Status TcpStoreClient::set_by(const std::string& key, std::span<const std::uint8_t> value,
                              Deadline deadline) {
  const std::string what = fmt::format("store set '{}'", key);
  const Deadline d = deadline.earliest(impl_->op_deadline());
  LOOM_ASSIGN_OR_RETURN(Response r,
                        impl_->call(wire::Op::Set, key, value.size(), value, d, d, what));
  if (r.reply == wire::Reply::Error) {
    return make_error(ErrorCode::InvalidArgument, "{}: {}", what, payload_text(r.payload));
  }
  return Status::ok();
}

Result<Bytes> TcpStoreClient::get(const std::string& key, Deadline deadline) {
  return get_impl(key, deadline, false);
}

Result<Bytes> TcpStoreClient::get_or_gone(const std::string& key, Deadline deadline) {
  return get_impl(key, deadline, true);
}

Result<Bytes> TcpStoreClient::get_impl(const std::string& key, Deadline deadline,
                                       bool ends_on_gone) {
  const std::string what = fmt::format("store get '{}'", key);
  const Deadline reply_deadline = extend(deadline, kServerGrace);
  LOOM_ASSIGN_OR_RETURN(
      Response r, impl_->call(wire::Op::Get, key, wire::get_arg(wait_ms(deadline), ends_on_gone),
                              {}, reply_deadline, reply_deadline, what));
  switch (r.reply) {
    case wire::Reply::Ok: return std::move(r.payload);
    case wire::Reply::Timeout:
      return make_error(ErrorCode::Timeout, "{}: timed out waiting for the key (rank {})", what,
                        impl_->rank);
    default: return make_error(ErrorCode::InvalidArgument, "{}: {}", what, payload_text(r.payload));
  }
}

Result<std::optional<Bytes>> TcpStoreClient::peek(const std::string& key, Deadline answer_by) {
  const std::string what = fmt::format("store look-up of '{}'", key);
  LOOM_ASSIGN_OR_RETURN(Response r,
                        impl_->call(wire::Op::Get, key, 0, {}, answer_by, answer_by, what));
  switch (r.reply) {
    case wire::Reply::Ok: return std::optional<Bytes>(std::move(r.payload));
    case wire::Reply::Timeout: return std::optional<Bytes>();
    default: return make_error(ErrorCode::InvalidArgument, "{}: {}", what, payload_text(r.payload));
  }
}

Result<std::int64_t> TcpStoreClient::add(const std::string& key, std::int64_t delta) {
  return add_by(key, delta, impl_->op_deadline());
}

Result<std::int64_t> TcpStoreClient::add_by(const std::string& key, std::int64_t delta,
                                            Deadline deadline) {
  const std::string what = fmt::format("store add '{}'", key);
  const Deadline d = deadline.earliest(impl_->op_deadline());
  LOOM_ASSIGN_OR_RETURN(Response r, impl_->call(wire::Op::Add, key,
                                                static_cast<std::uint64_t>(delta), {}, d, d, what));
  if (r.reply == wire::Reply::Error) {
    return make_error(ErrorCode::InvalidArgument, "{}: {}", what, payload_text(r.payload));
  }
  return static_cast<std::int64_t>(r.arg);
}

Result<std::int64_t> TcpStoreClient::erase_prefix(const std::string& prefix) {
  const std::string what = fmt::format("store erase '{}'", prefix);
  const Deadline d = impl_->op_deadline();
  LOOM_ASSIGN_OR_RETURN(Response r, impl_->call(wire::Op::Erase, prefix, 0, {}, d, d, what));
  if (r.reply == wire::Reply::Error) {
    return make_error(ErrorCode::InvalidArgument, "{}: {}", what, payload_text(r.payload));
  }
  return static_cast<std::int64_t>(r.arg);
}

namespace {

// n records of u32 length | value.
Result<std::vector<Bytes>> split_gathered(const Bytes& payload, int n, const std::string& what) {
  std::vector<Bytes> out(static_cast<std::size_t>(n));
  std::size_t at = 0;
  for (Bytes& v : out) {
    if (payload.size() - at < 4) break;
    const std::size_t len = wire::get_u32(payload.data() + at);
    at += 4;
    if (payload.size() - at < len) {
      at = payload.size() + 1;
      break;
    }
    v.assign(payload.begin() + static_cast<std::ptrdiff_t>(at),
             payload.begin() + static_cast<std::ptrdiff_t>(at + len));
    at += len;
  }
  if (at != payload.size())
    return make_error(ErrorCode::Internal, "{}: the server's answer is malformed", what);
  return out;
}

}  // namespace

Result<std::vector<Bytes>> TcpStoreClient::gather(const std::string& prefix, int n,
                                                  Deadline deadline) {
  return gather_impl(prefix, n, deadline, false);
}

Result<std::vector<Bytes>> TcpStoreClient::gather_or_gone(const std::string& prefix, int n,
                                                          Deadline deadline) {
  return gather_impl(prefix, n, deadline, true);
}

Result<std::vector<Bytes>> TcpStoreClient::gather_impl(const std::string& prefix, int n,
                                                       Deadline deadline, bool ends_on_gone) {
  const std::string what = fmt::format("store gather '{}' of {} ranks", prefix, n);
  if (n < 1 || n > wire::kMaxGatherRanks)
    return make_error(ErrorCode::InvalidArgument, "{}: rank count out of range", what);
  const Deadline reply_deadline = extend(deadline, kServerGrace);
  LOOM_ASSIGN_OR_RETURN(
      Response r,
      impl_->call(wire::Op::Gather, prefix, wire::gather_arg(n, wait_ms(deadline), ends_on_gone),
                  {}, reply_deadline, reply_deadline, what));
  switch (r.reply) {
    case wire::Reply::Ok: return split_gathered(r.payload, n, what);
    case wire::Reply::Timeout:
      return make_error(ErrorCode::Timeout, "gather '{}': timed out waiting for {}: {}", prefix,
                        "rank(s)", payload_text(r.payload));
    default: return make_error(ErrorCode::InvalidArgument, "{}: {}", what, payload_text(r.payload));
  }
}

Result<int> TcpStoreClient::watch(const std::vector<std::string>& keys, Deadline deadline) {
  std::string list;
  for (const std::string& k : keys) {
    if (k.find('\n') != std::string::npos)
      return make_error(ErrorCode::InvalidArgument, "store watch: key '{}' holds a newline", k);
    if (!list.empty()) list += '\n';
    list += k;
  }
  const std::string what = fmt::format("store watch of {} keys", keys.size());
  // A watch's answer is no hurry: a busy host delaying it is no reason to resync the link.
  const Deadline reply_deadline = extend(deadline, kWatchGrace);
  LOOM_ASSIGN_OR_RETURN(Response r, impl_->call(wire::Op::Watch, list, wait_ms(deadline), {},
                                                reply_deadline, reply_deadline, what));
  switch (r.reply) {
    case wire::Reply::Ok:
      if (r.arg >= keys.size())
        return make_error(ErrorCode::Internal, "{}: the server named key #{}", what, r.arg);
      return static_cast<int>(r.arg);
    case wire::Reply::Timeout: return make_error(ErrorCode::Timeout, "{}: timed out", what);
    default: return make_error(ErrorCode::InvalidArgument, "{}: {}", what, payload_text(r.payload));
  }
}

Result<std::shared_ptr<Store>> TcpStoreClient::watch_link(Deadline deadline) {
  LOOM_ASSIGN_OR_RETURN(
      auto link, connect(impl_->server, impl_->comm_id, impl_->rank, deadline, impl_->secret));
  link->set_op_timeout(milliseconds(impl_->op_timeout_ms.load()));
  return std::shared_ptr<Store>(std::move(link));
}

void TcpStoreClient::interrupt() {
  impl_->interrupted = true;
  const int fd = impl_->live_fd.load();
  if (fd >= 0) (void)::shutdown(fd, SHUT_RDWR);
}

Result<std::vector<GoneClient>> TcpStoreClient::gone(Deadline deadline) {
  const std::string what = "store list of vanished clients";
  const Deadline d = deadline.earliest(impl_->op_deadline());
  LOOM_ASSIGN_OR_RETURN(Response r, impl_->call(wire::Op::Gone, "-", 0, {}, d, d, what));
  if (r.reply == wire::Reply::Error) {
    return make_error(ErrorCode::InvalidArgument, "{}: {}", what, payload_text(r.payload));
  }
  std::vector<GoneClient> out;
  std::istringstream in(payload_text(r.payload));
  GoneClient g;
  while (in >> g.rank >> g.pid >> g.host) out.push_back(g);
  return out;
}

}  // namespace loom::bootstrap
