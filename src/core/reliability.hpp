// The communicator's reliability (docs/reliability.md): the failure monitor that shares
// failures between the ranks, and the derived communicators (split, shrink) with the store they
// meet on, re-rooted when the rank whose process serves this communicator's store is not among
// them. The communicator owns one, created once its engine runs; it reaches the communicator only
// through the hooks it is given.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/store.hpp"
#include "bootstrap/tcp_store.hpp"
#include "common/crypto.hpp"
#include "common/socket.hpp"
#include "core/failure_monitor.hpp"
#include "topology/topology.hpp"

namespace loom::detail {

/// What the reliability layer needs from its communicator, given once.
struct ReliabilitySetup {
  int rank = 0;
  int nranks = 1;
  std::uint64_t comm_id = 0;
  std::shared_ptr<bootstrap::Store> store;
  bool serves_store = false;        // this process runs the store's server
  net::SocketAddress data_address;  // the host's address this rank listens on
  crypto::Secret secret{};          // the job's: a derived store demands it too
  bootstrap::ServerOptions store_options;
  std::chrono::milliseconds timeout{600'000};
  FailureMonitor::Hooks hooks;  // progress without RankProgress::derived (Reliability adds it)
};

/// A derived communicator: who it has, this rank's place in it, and the store it meets on.
struct Derivation {
  bool member = false;  // false: this rank is not in it (split with a negative color)
  std::uint64_t comm_id = 0;
  int new_rank = 0;
  std::vector<int> members;                 // this communicator's ranks, in their new order
  std::shared_ptr<bootstrap::Store> store;  // null: this communicator's
  std::shared_ptr<bootstrap::TcpStoreServer> server;  // served here, if any
};

class Reliability {
 public:
  /// Exchanges the ranks' identities (pid, host, who serves the store, standby address) and
  /// starts the failure monitor. `wait_check` is asked while waiting for the other ranks.
  static Result<std::unique_ptr<Reliability>> start(ReliabilitySetup setup,
                                                    const topo::Topology& topology,
                                                    Deadline deadline,
                                                    const bootstrap::WaitCheck& wait_check);

  FailureMonitor& monitor() { return *monitor_; }
  [[nodiscard]] const FailureMonitor& monitor() const { return *monitor_; }

  /// split(color, key) (collective): the ranks of `color` ordered by key.
  Result<Derivation> split(int color, int key);
  /// shrink(excluded) (collective): every rank but `excluded`.
  Result<Derivation> shrink(const std::vector<int>& excluded);
  /// The communicator is done with this store for a split() or shrink() (its derived
  /// communicator was created, or failed): counted in this rank's progress.
  void finished_deriving() { ++derived_done_; }
  /// split()/shrink() calls finished with this communicator's store.
  [[nodiscard]] std::int64_t derived_done() const { return derived_done_.load(); }

 private:
  Reliability(ReliabilitySetup setup, net::Fd standby, std::vector<std::string> standby_addrs,
              int store_host);
  /// The store's host is excluded from a shrink: the lowest survivor serves a new store on its
  /// standby listener.
  Status reroot_for_shrink(Derivation& d, const std::vector<int>& out);
  /// A split group without the store's host: its rank 0 serves the group's own store, whose
  /// address travels through this communicator's store under `key`.
  Status reroot_for_split(Derivation& d, const std::string& key);
  /// Joins the store at `where` as the derived communicator's rank.
  Status join(Derivation& d, const std::string& where);

  ReliabilitySetup setup_;
  net::Fd standby_;                         // this rank's standby store listener
  std::vector<std::string> standby_addrs_;  // every rank's ("" if it has none)
  int store_host_ = -1;                     // rank whose process serves the store (-1: none)
  std::uint64_t derived_ = 0;               // split/shrink calls so far
  std::atomic<std::int64_t> derived_done_{0};
  std::unique_ptr<FailureMonitor> monitor_;
};

}  // namespace loom::detail
