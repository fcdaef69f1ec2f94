// TCP store: a server thread (run by rank 0 or by the process that created the UniqueId) and a
// client per rank. Wire: length-prefixed request/response frames, validated before use.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/store.hpp"
#include "common/crypto.hpp"
#include "common/socket.hpp"

namespace loom::bootstrap {

struct ServerOptions {
  /// A connection that has not proved the secret within this time is dropped (and logged).
  /// Grows by kHelloPerMember per member, since a big job's ranks answer their challenge late
  /// on a loaded host.
  std::chrono::milliseconds hello_timeout{5000};
  /// Connections still in their hello beyond this number plus the job's members: the oldest is
  /// dropped. Members can all connect at once; non-members never get more than this many.
  std::size_t max_pending = 256;
  /// Ranks expected to join (0: unknown). The limits also grow with the highest rank an
  /// authenticated client presented, so a server started before the job size is known still
  /// admits the whole job; neither source is under a non-member's control.
  int members = 0;
  /// Bytes of keys and values one rank may hold in the store (every write counted to the rank
  /// that made it): a client beyond it gets an error instead of growing the server's memory.
  std::size_t client_quota = std::size_t{64} << 20;
};

/// An authenticated client of a TcpStoreServer, as its hello said.
/// How much a member raises the hello deadline.
constexpr std::chrono::milliseconds kHelloPerMember{10};
/// The listen backlog for a job of `members` ranks (the kernel caps it at somaxconn).
int listen_backlog(int members);

/// What a server has served so far.
struct StoreLoad {
  std::uint64_t requests = 0;  // every request (a parked one counts once)
  std::uint64_t gathers = 0;   // ... of them GATHERs
  std::uint64_t hellos = 0;    // authenticated connections
  std::uint64_t bytes_out = 0;
};

struct StoreClientInfo {
  int rank = -1;
  std::uint32_t pid = 0;
  std::string host;
};

/// Serves a store on a listening socket from a background thread until destroyed.
/// Clients must present `comm_id` in their hello and prove knowledge of `secret` (HMAC-SHA256
/// over the server's random challenge); others are dropped (and logged) before any request is
/// read. A second process claiming a rank that a connected client holds is refused, naming
/// both. A client that vanishes without saying goodbye is listed by Store::gone().
class TcpStoreServer {
 public:
  static Result<std::unique_ptr<TcpStoreServer>> start(const net::SocketAddress& bind_addr,
                                                       std::uint64_t comm_id,
                                                       const crypto::Secret& secret = {},
                                                       const ServerOptions& options = {});
  /// Serves on a socket that is already listening (a standby listener bound at init: clients
  /// that connected before the server started wait in its backlog).
  static Result<std::unique_ptr<TcpStoreServer>> start_on(net::Fd listen_fd, std::uint64_t comm_id,
                                                          const crypto::Secret& secret,
                                                          const ServerOptions& options = {});
  ~TcpStoreServer();  // says Closing to every client, stops the thread, closes every socket
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;
  /// The address clients connect to (ephemeral port resolved).
  [[nodiscard]] const net::SocketAddress& address() const;
  /// The authenticated clients connected now (thread-safe snapshot).
  [[nodiscard]] std::vector<StoreClientInfo> clients() const;
  /// What it has served so far (thread-safe; logged at shutdown too).
  [[nodiscard]] StoreLoad load() const;
  /// Why the server will shut down (its owner failed), told to every client with Closing.
  void set_closing_reason(const std::string& why);

  struct Impl;

 private:
  explicit TcpStoreServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// One rank's connection to a TcpStoreServer. Thread-safe (calls are serialised).
///
/// GET timeouts are enforced by the server, so a timed-out get() leaves the connection usable.
/// If the server does not answer at all (a get() 1 s past its deadline, or set()/add() past the
/// operation timeout), the call fails with Timeout but the connection stays: a slow server is
/// not a dead one, and the late answer is read and skipped by a later call (requests are
/// answered in order). Only a connection left out of sync (an answer cut off part-way) is
/// closed; the next call then reconnects (with a new hello) after a backoff of 50 ms doubling
/// to 2 s, with jitter, so the clients of a busy server do not all hello again at once. When the
/// server closes the connection (server gone, or it rejected this client) the client is broken for
/// good: every later call fails at once with PeerFailed. A server shutting down cleanly says so
/// first (a Closing frame), so server_lost() tells a finalized server from a dead one. A client
/// destroyed (or left behind at a normal process exit) says goodbye, so its server does not list it
/// as gone.
class TcpStoreClient final : public Store {
 public:
  /// Connects (retrying until `deadline`, so ranks may start before the server) and says hello.
  static Result<std::unique_ptr<TcpStoreClient>> connect(const net::SocketAddress& server,
                                                         std::uint64_t comm_id, int rank,
                                                         Deadline deadline,
                                                         const crypto::Secret& secret = {});
  ~TcpStoreClient() override;
  Status set(const std::string& key, std::span<const std::uint8_t> value) override;
  Result<Bytes> get(const std::string& key, Deadline deadline) override;
  /// One GET that does not wait at the server; the server's Timeout reply means the key is
  /// missing, no reply by `answer_by` is this call's Timeout.
  Result<std::optional<Bytes>> peek(const std::string& key, Deadline answer_by) override;
  Result<std::int64_t> add(const std::string& key, std::int64_t delta) override;
  Status set_by(const std::string& key, std::span<const std::uint8_t> value,
                Deadline deadline) override;
  Result<std::int64_t> add_by(const std::string& key, std::int64_t delta,
                              Deadline deadline) override;
  Result<std::int64_t> erase_prefix(const std::string& prefix) override;
  /// One GATHER request, parked at the server until every key is in.
  Result<std::vector<Bytes>> gather(const std::string& prefix, int n, Deadline deadline) override;
  /// A GET or GATHER that the server also ends (Timeout) when a client vanishes.
  Result<Bytes> get_or_gone(const std::string& key, Deadline deadline) override;
  Result<std::vector<Bytes>> gather_or_gone(const std::string& prefix, int n,
                                            Deadline deadline) override;
  [[nodiscard]] bool waits_end_on_gone() const override { return true; }
  Result<std::vector<GoneClient>> gone(Deadline deadline) override;
  /// One WATCH request, parked at the server until a key is set.
  Result<int> watch(const std::vector<std::string>& keys, Deadline deadline) override;
  /// Another client of the same server, rank and secret.
  Result<std::shared_ptr<Store>> watch_link(Deadline deadline) override;
  /// Shuts the connection down under a blocked call (which fails at once); no goodbye follows.
  void interrupt() override;
  /// The server closed the connection without its clean-shutdown frame (its process died, or
  /// the connection broke): false while connected and after a clean shutdown.
  [[nodiscard]] bool server_lost() const override;
  /// Bounds set(), add() and reconnections (default 600 s, like LOOM_TIMEOUT).
  void set_op_timeout(std::chrono::milliseconds timeout);

  struct Impl;

 private:
  explicit TcpStoreClient(std::unique_ptr<Impl> impl);
  Result<Bytes> get_impl(const std::string& key, Deadline deadline, bool ends_on_gone);
  Result<std::vector<Bytes>> gather_impl(const std::string& prefix, int n, Deadline deadline,
                                         bool ends_on_gone);
  std::unique_ptr<Impl> impl_;
};

}  // namespace loom::bootstrap
