// Rendezvous key-value store used during setup and for out-of-band diagnostics.
// Three implementations: in-memory (threads as ranks), TCP (client/server), and wrappers.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/deadline.hpp"
#include "common/status.hpp"

namespace loom::bootstrap {

using Bytes = std::vector<std::uint8_t>;

/// A stored value read as text (the store's values are bytes; most of loom's are text).
inline std::string_view as_text(const Bytes& b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}
/// Text as a value to store.
inline std::span<const std::uint8_t> as_bytes(const std::string& s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

/// A client of the store that vanished without saying goodbye (its process died, or its
/// connection broke): the rank its hello named, its pid and host.
struct GoneClient {
  int rank = -1;
  std::uint32_t pid = 0;
  std::string host;
};

class Store {
 public:
  virtual ~Store() = default;
  /// Sets `key` (overwrites) and wakes every waiter on it.
  virtual Status set(const std::string& key, std::span<const std::uint8_t> value) = 0;
  /// Returns the value of `key`, waiting until some rank sets it or `deadline` passes (Timeout,
  /// naming the key).
  virtual Result<Bytes> get(const std::string& key, Deadline deadline) = 0;
  /// The value of `key` now (nullopt: no rank has set it), asked once; Timeout only when the store
  /// gave no answer by `answer_by` (slow, or its process stopped). Callers that act on evidence
  /// tell "missing" from "not answered" with it. This default cannot tell them apart: a get()
  /// that does not wait, whose Timeout reads as missing.
  virtual Result<std::optional<Bytes>> peek(const std::string& key, Deadline /*answer_by*/);
  /// Atomically adds `delta` to the integer counter `key` (missing: 0) and returns the new value.
  virtual Result<std::int64_t> add(const std::string& key, std::int64_t delta) = 0;
  /// set() and add() bounded by `deadline` instead of the store's operation timeout, for callers
  /// that must not wait long for a store that stopped answering (the hang report).
  virtual Status set_by(const std::string& key, std::span<const std::uint8_t> value,
                        Deadline /*deadline*/) {
    return set(key, value);
  }
  virtual Result<std::int64_t> add_by(const std::string& key, std::int64_t delta,
                                      Deadline /*deadline*/) {
    return add(key, delta);
  }
  /// Waits until the keys `prefix`/0 .. `prefix`/(n-1) all exist and returns their values in
  /// order; Timeout at `deadline` names the ranks whose key is missing. The TCP store answers it
  /// with one request parked at its server (an allgather costs the server O(n) requests, not
  /// O(n^2)); this default asks key by key.
  virtual Result<std::vector<Bytes>> gather(const std::string& prefix, int n, Deadline deadline);
  /// get() and gather(), which the TCP store's server also ends (Timeout) as soon as one of its
  /// clients vanishes without a goodbye, or has vanished since this connection's last such wait:
  /// the caller then checks at once whether a member died, and need not ask again every few
  /// hundred milliseconds while it waits. These defaults are get() and gather().
  virtual Result<Bytes> get_or_gone(const std::string& key, Deadline deadline) {
    return get(key, deadline);
  }
  virtual Result<std::vector<Bytes>> gather_or_gone(const std::string& prefix, int n,
                                                    Deadline deadline) {
    return gather(prefix, n, deadline);
  }
  /// Whether get_or_gone() and gather_or_gone() end on a vanished client (then a waiting rank's
  /// liveness checks are pushed, and the checked waits below ask again only every 30 s).
  [[nodiscard]] virtual bool waits_end_on_gone() const { return false; }
  /// Waits until one of `keys` exists and returns its index; Timeout at `deadline`. The TCP store
  /// parks one request at its server (a push: nothing is asked while nothing changes); this
  /// default looks every 50 ms.
  virtual Result<int> watch(const std::vector<std::string>& keys, Deadline deadline);
  /// A second connection to the same store, for a thread that blocks in watch() while this one
  /// serves other calls (the TCP client serialises its calls); null: this store does not offer
  /// one, and its users poll instead.
  virtual Result<std::shared_ptr<Store>> watch_link(Deadline /*deadline*/) {
    return std::shared_ptr<Store>{};
  }
  /// Ends another thread's blocking call at once (its connection is closed); a store that is
  /// not used again after.
  virtual void interrupt() {}
  /// Removes every key that starts with `prefix` (a finished communicator's keys); returns how
  /// many were removed.
  virtual Result<std::int64_t> erase_prefix(const std::string& prefix) = 0;
  /// The clients that vanished without a goodbye so far (stores without clients: none), asked
  /// within `deadline`.
  virtual Result<std::vector<GoneClient>> gone(Deadline /*deadline*/) {
    return std::vector<GoneClient>{};
  }
  /// True once the store's server went away without a clean shutdown (its process died): the
  /// failure monitor reports the rank that hosted it. Stores without a server never lose it.
  [[nodiscard]] virtual bool server_lost() const { return false; }
};

/// The key a TCP store's server sets when the `n`-th client (1, 2, ...) vanishes without a
/// goodbye (watch() it to learn of deaths without polling gone()).
std::string gone_key(std::int64_t n);

/// Asked every few hundred milliseconds while a rendezvous waits: an error (a rank known to
/// have died) ends the wait with it.
using WaitCheck = std::function<Status()>;

/// Every rank publishes `value` under `prefix`; returns all ranks' values in rank order.
Result<std::vector<Bytes>> store_allgather(Store& store, const std::string& prefix, int rank,
                                           int nranks, std::span<const std::uint8_t> value,
                                           Deadline deadline, const WaitCheck& check = {});
/// Returns once all `nranks` ranks have entered the barrier named `name` (each name used once).
Status store_barrier(Store& store, const std::string& name, int rank, int nranks, Deadline deadline,
                     const WaitCheck& check = {});
/// store.get(key, deadline), asking `check` between slices of the wait (as above); the slices
/// grow with the number of ranks `waiters` that wait alike.
Result<Bytes> store_get_checked(Store& store, const std::string& key, Deadline deadline,
                                const WaitCheck& check, int waiters = 1);
/// Fails barrier `name` for the ranks waiting at it (or arriving later): a rank that will not
/// reach it posts why, so the others fail at once with its reason instead of at their deadline.
/// The first failing rank's reason stands. Call only instead of store_barrier, never after it.
Status store_barrier_fail(Store& store, const std::string& name, int rank, const Status& why);

// Counters: Store::add keeps a counter's value as decimal ASCII text ("-12"), so get() on a
// counter key returns that text. Shared by every Store implementation.

/// Parses a counter value stored under `key` (InvalidArgument if it is not a decimal int64).
Result<std::int64_t> parse_counter(std::span<const std::uint8_t> bytes, const std::string& key);
/// The decimal text of `value`.
Bytes format_counter(std::int64_t value);
/// `current` (null: the key is missing, i.e. 0) plus `delta`, with overflow checked.
Result<std::int64_t> counter_add(const Bytes* current, std::int64_t delta, const std::string& key);

}  // namespace loom::bootstrap
