// The TCP store server's event loop (one thread): accepting and authenticating clients, their
// input and output buffers, and the key space they share. Internal to tcp_store_*.cpp.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "bootstrap/tcp_store.hpp"
#include "bootstrap/tcp_store_wire.hpp"

namespace loom::bootstrap::server {

using std::chrono::milliseconds;

struct Conn {
  std::uint64_t id = 0;
  net::Fd fd;
  std::string peer;  // its address
  Clock::time_point accepted;
  bool hello_done = false;
  crypto::Nonce nonce{};  // the challenge this client must answer
  int rank = -1;
  std::uint32_t pid = 0;
  std::string host;
  bool said_bye = false;
  bool dead = false;
  std::vector<std::uint8_t> in;
  std::size_t in_pos = 0;
  std::vector<std::uint8_t> out;
  std::size_t out_pos = 0;
  bool parked = false;
  bool parked_gather = false;   // parked on a GATHER of parked_key, not a GET
  bool ends_on_gone = false;    // parked on a GET or GATHER that a vanished client ends
  std::uint64_t gone_told = 0;  // vanished clients this connection's such waits were told of
  std::string parked_key;
  std::vector<std::string> watch_keys;  // parked on a WATCH of these keys
  Clock::time_point parked_until;

  [[nodiscard]] bool wants_input() const;
  /// "rank 3 (pid 1234 on h1, from 10.0.0.3:41234)", or the address before the hello.
  [[nodiscard]] std::string who() const;
};

/// One key's value and which rank wrote it (for the per-rank quota).
struct Entry {
  Bytes value;
  int owner = -1;
};

/// The GATHERs of one prefix: which of its n keys exist, who waits for the rest, and the answer
/// once built (kept for late gatherers until a key under it changes).
struct Gather {
  int n = 0;
  int have = 0;
  std::vector<bool> present;
  std::vector<std::uint64_t> waiters;
  Bytes answer;
  bool answer_built = false;
};

/// Requests served, for the log line at shutdown (the busiest process's load at scale).
struct Served {
  std::atomic<std::uint64_t> requests{0};  // written by the loop, read by any thread
  std::atomic<std::uint64_t> gathers{0};
  std::atomic<std::uint64_t> hellos{0};
  std::atomic<std::uint64_t> bytes_out{0};
  std::array<std::atomic<std::uint64_t>, 9> by_op{};  // indexed by wire::Op
};

class Loop {
 public:
  Loop(net::Fd listen_fd, net::Fd wake_fd, std::uint64_t comm_id, std::string addr,
       const crypto::Secret& secret, const ServerOptions& options);

  void run();
  [[nodiscard]] int wake_fd() const { return wake_.get(); }
  /// Closes every client socket (after the thread has stopped).
  void close_all();
  /// The authenticated clients connected now (any thread).
  [[nodiscard]] std::vector<StoreClientInfo> clients() const;
  void set_closing_reason(const std::string& why);  // any thread
  [[nodiscard]] StoreLoad load() const;             // any thread

 private:
  // Connections (tcp_store_loop.cpp).
  int poll_timeout_ms() const;
  void accept_all();
  void cap_pending();
  /// The job's size as far as the server knows it (configured, or the highest member's rank).
  [[nodiscard]] std::size_t members() const;
  [[nodiscard]] milliseconds hello_timeout() const;
  void forget_pending(const Conn& c);
  void on_ready(Conn& c, short revents);
  [[nodiscard]] bool tail_is_bye(const Conn& c) const;
  void read_input(Conn& c);
  void process_input(Conn& c);
  bool handle_hello(Conn& c);
  bool refuse_duplicate(Conn& c);
  void respond(Conn& c, wire::Reply r, std::uint64_t arg, std::span<const std::uint8_t> payload);
  void flush(Conn& c);
  void expire();
  void drop(Conn& c, const std::string& why, bool warn, bool vanished);
  /// Another open, authenticated connection of the same client process (rank, pid, host).
  [[nodiscard]] bool has_sibling(const Conn& c) const;
  void drain_runnable();
  void sweep();
  void say_goodbye();
  void publish_clients();

  // Requests (tcp_store_requests.cpp).
  void dispatch(Conn& c, const wire::RequestHeader& h, std::string key,
                std::span<const std::uint8_t> value);
  void handle_set(Conn& c, std::string key, std::span<const std::uint8_t> value);
  void handle_add(Conn& c, const std::string& key, std::int64_t delta);
  bool park_or_timeout(Conn& c, std::uint64_t wait_ms);
  void handle_get(Conn& c, const wire::RequestHeader& h, std::string key);
  void handle_erase(Conn& c, const std::string& prefix);
  void handle_gone(Conn& c);
  void handle_watch(Conn& c, const wire::RequestHeader& h, const std::string& list);
  void note_gone(const Conn& c);
  void end_waits_on_gone();
  /// A wait that ends on a vanished client, asked after one this connection was not told of.
  bool untold_gone(Conn& c, bool ends_on_gone);
  void handle_gather(Conn& c, const wire::RequestHeader& h, std::string prefix);
  Gather& gather_of(const std::string& prefix, int n);
  void count_gather(Gather& g, const std::string& prefix);
  const Bytes& gather_answer(Gather& g, const std::string& prefix);
  std::string gather_missing(const Gather& g) const;
  void note_gathered(const std::string& key);
  void recount_gathers(const std::string& erased_prefix);
  void log_served() const;
  bool charge(Conn& c, const std::string& key, std::size_t new_size);
  void store(const std::string& key, Bytes value, int owner);
  void refund(int owner, std::size_t bytes);
  void wake_waiters(const std::string& key);
  void unpark(Conn& c);
  void reply_error(Conn& c, const std::string& msg);

  net::Fd listen_;
  net::Fd wake_;
  std::uint64_t comm_id_;
  crypto::Secret secret_;
  std::string addr_;
  ServerOptions options_;
  std::uint64_t next_id_ = 1;
  std::set<std::uint64_t> pending_;  // connections in their hello, oldest first
  int highest_rank_ = -1;            // the highest rank an authenticated client presented
  Clock::time_point accept_paused_until_{};
  std::unordered_map<std::uint64_t, std::unique_ptr<Conn>> conns_;
  std::map<std::string, std::set<std::uint64_t>> waiters_;  // key -> parked client ids
  std::vector<std::uint8_t> read_buf_;   // one read's bytes, before they join a client's input
  std::vector<std::uint64_t> runnable_;  // unparked clients that may have buffered requests
  std::map<std::string, Entry> data_;
  std::unordered_map<std::string, Gather> gathers_;  // prefix -> its gathers
  Served served_;
  std::map<int, std::size_t> usage_;  // bytes held per writing rank
  std::string gone_;                  // "rank pid host\n" per client that vanished
  std::int64_t gone_count_ = 0;
  mutable std::mutex clients_mu_;
  std::vector<StoreClientInfo> clients_;  // snapshot for clients()
  std::string closing_reason_;            // under clients_mu_
};

}  // namespace loom::bootstrap::server
