// The communicator's internals: a few components (store, transport, engine) and the code that
// turns a call into a Plan and submits it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "algorithms/plan.hpp"
#include "bootstrap/store.hpp"
#include "bootstrap/tcp_store.hpp"
#include "collective/op.hpp"
#include "config/config.hpp"
#include "core/call_ledger.hpp"
#include "core/device_network.hpp"
#include "core/failure_monitor.hpp"
#include "core/group_tasks.hpp"
#include "core/peer_transports.hpp"
#include "core/planner.hpp"
#include "core/reliability.hpp"
#include "core/task_host.hpp"
#include "device/direct_path.hpp"
#include "device/stream_path.hpp"
#include "executor/engine.hpp"
#include "loom/options.hpp"
#include "loom/work.hpp"

namespace loom::detail {

struct JobLayout;

/// A call recorded in an open group (group.cpp).
struct GroupMember {
  coll::OpDesc op;
  CollOptions opts;
  bool on_stream = false;
  std::shared_ptr<OpState> proxy;  // what the caller's Work holds
};

/// The longest a small call through the arena polls on its caller's thread, inside the call,
/// before the engine takes it over (engine.hpp, submit_inline): peers in step answer within a
/// microsecond; a caller that overlaps work with the call loses at most this.
inline constexpr std::chrono::microseconds kInlineSpin{2};

/// Settings the communicator reads once, at creation.
struct CommSettings {
  std::chrono::milliseconds timeout{600'000};
  std::chrono::milliseconds check_calls_after{1000};  // LOOM_MISMATCH_CHECK_AFTER (0: off)
  /// What shapes plans (LOOM_CHUNK_SIZE, LOOM_PIPELINE_DEPTH, LOOM_ALGO, LOOM_TUNING,
  /// LOOM_DETERMINISTIC). chunk_bytes 0 (auto) and buffered_ring_sends (the transports' hint) are
  /// resolved at init.
  PlanSettings plan;
  std::chrono::microseconds spin{50};
  std::chrono::microseconds yield{-1};        // LOOM_YIELD_US; < 0: kAutoYield at init
  std::chrono::microseconds arena_yield{-1};  // the arena's calls' (kSharedCpuArenaYield, init)
  std::string algo = "auto";
  std::string device = "auto";    // LOOM_DEVICE
  bool wait_value_gates = false;  // LOOM_STREAM_GATE=wait-value
  OfiHmemMode ofi_hmem = OfiHmemMode::Auto;
  std::string oneshot = "auto";       // LOOM_SHM_ONESHOT_MAX (as set)
  std::size_t oneshot_max = 0;        // its bytes for this communicator's size (init_arena)
  std::string arena_piece = "auto";   // LOOM_SHM_ARENA_PIECE (as set)
  std::size_t arena_piece_bytes = 0;  // its bytes per rank for this communicator (init_arena)
  std::size_t flight_calls = CallLedger::kDefaultHistory;  // LOOM_FLIGHT_RECORDER
  std::string flight_dir;                                  // LOOM_FLIGHT_DIR ("": no files)

  /// Checks every transport's settings too (through the transport registry), so that creation
  /// fails early on a bad one, naming it.
  static Result<CommSettings> from(const config::Config& cfg);
};

/// Everything CommImpl::create needs; the bootstrap store is already connected.
struct CommSetup {
  int rank = 0;
  int nranks = 1;
  std::uint64_t comm_id = 0;
  std::shared_ptr<bootstrap::Store> store;
  std::shared_ptr<bootstrap::TcpStoreServer> server;  // rank 0 may own the rendezvous server
  net::SocketAddress bind_address;                    // where this rank's transport listens
  config::Config config;
  crypto::Secret secret{};  // the job's secret: every data connection proves knowledge of it
  /// Asked while the communicator is being created (every few hundred ms of waiting): fails
  /// creation at once, naming the rank, when a member is known to have died.
  std::function<Status()> liveness;
};

struct JobLayout;
class ArenaTask;

class CommImpl final : public TaskHost {
 public:
  static Result<std::unique_ptr<CommImpl>> create(CommSetup setup);
  ~CommImpl() override;

  [[nodiscard]] int rank() const override { return rank_; }
  [[nodiscard]] int size() const override { return nranks_; }
  /// Validates, plans and queues one collective. Throws loom::Error on bad arguments or a
  /// failed communicator.
  Work submit(coll::OpDesc op, const CollOptions& opts);
  /// A receive from any source (op.p2p.any_source); `*source` is the sender's
  /// rank once it completes. Not in a group, host memory only.
  Work receive_any(coll::OpDesc op, int* source, const CollOptions& opts);
  /// Grouped calls (group.cpp): calls between the outermost start and end are recorded, then
  /// run together: allreduces of one type and op fused into one, sends and receives side by
  /// side in one operation (collectives first, in call order).
  void group_start();
  void group_end();

  // Used by CollectiveTask while it runs (on the driving thread, one task at a time).
  Status connect(const std::vector<int>& peers, Deadline deadline) override;
  [[nodiscard]] transport::Connection* connection(int peer) const override;
  std::uint8_t* scratch(std::size_t bytes) override;
  [[nodiscard]] std::size_t window() const override { return 2 * settings_.plan.depth; }
  [[nodiscard]] const CommSettings& settings() const { return settings_; }
  /// Called by CollectiveTask when operation `seq` completed successfully.
  void note_started(std::uint64_t seq) override;
  void note_completed(std::uint64_t seq) override;
  void note_submitted(const coll::OpDesc& op, const char* algorithm,
                      Clock::time_point submitted) override;
  void note_ran(const coll::OpDesc& op, const char* algorithm,
                Clock::time_point submitted) override;
  void note_p2p_started(const coll::OpDesc& op) override;
  void note_p2p_completed(const coll::OpDesc& op) override;
  /// A PeerFailed naming a peer (local or reported): tells the cuda_ipc transport (first wins).
  void note_failed_peer(const Status& why);
  /// Mismatched calls that no message check catches (call_check.cpp): Mismatch naming both
  /// ranks and both calls when a connection holds a message of a call up to #upto, which this rank
  /// has finished: no call will ever receive it. Run as the driving thread (a barrier's task, the
  /// engine's idle check).
  Status find_unread_messages(std::int64_t finished, std::int64_t reached) override;
  [[nodiscard]] std::uint64_t next_receive(int peer) const override {
    return calls_.next_receive(peer);
  }
  std::uint64_t claim_receive(int peer) override { return calls_.claim_receive(peer); }
  std::unique_ptr<exec::PlanRun> reuse_run() override;
  void recycle_run(std::unique_ptr<exec::PlanRun> run) override;

  // Reliability (see docs/reliability.md).
  /// Fails every pending operation with Aborted and releases the engine, the failure monitor
  /// and every transport resource, within 1 s. Thread-safe.
  void abort();
  /// The first failure (an operation's or a peer's), without blocking; ok while healthy.
  [[nodiscard]] Status async_error() const;
  [[nodiscard]] std::vector<int> failed_ranks() const;
  [[nodiscard]] std::string status() const;
  /// The flight record (flight_record.hpp), and writing it under LOOM_FLIGHT_DIR (if set;
  /// a failure to write is logged).
  [[nodiscard]] std::string flight_record(std::string_view reason, const std::string& status) const;
  void write_flight_record(std::string_view reason, const std::string& status) const;
  [[nodiscard]] RankProgress progress() const;
  /// A PeerFailed naming a peer, with the peer's host and pid added (else unchanged).
  [[nodiscard]] Status name_failed_peer(const Status& why) const override;
  /// PeerFailed naming `peer` when the failure monitor knows it failed, else ok (asked while a
  /// connection to `peer` is being set up; -1: any failed peer).
  [[nodiscard]] Status known_failure(int peer) const;
  /// New communicators over the same store (collective; see Communicator::split/shrink). Null
  /// when this rank is not a member.
  Result<std::unique_ptr<CommImpl>> split(int color, int key);
  Result<std::unique_ptr<CommImpl>> shrink(const std::vector<int>& excluded);

 private:
  CommImpl(CommSetup setup, CommSettings settings);
  /// What the transports are created from: this rank's part (the layout's part is added by
  /// connect(); before the layout exchange, data_address is still unknown).
  [[nodiscard]] transport::CreateContext create_context() const;
  Status init(std::vector<std::unique_ptr<transport::Transport>> prepared, Deadline deadline);
  Status connect(std::vector<std::unique_ptr<transport::Transport>> prepared,
                 const JobLayout& layout, const std::string& prefix, Deadline deadline);
  Status start_reliability(const JobLayout& layout, Deadline deadline);
  Status init_direct_path(device::Device* dev, const JobLayout& layout, const std::string& prefix,
                          Deadline deadline);
  /// The arena, when every rank is on this host and served by a transport that makes one, and
  /// LOOM_SHM_ONESHOT_MAX or LOOM_SHM_ARENA_PIECE is not 0 (comm_arena.cpp). Collective: every
  /// rank says whether it can.
  Status init_arena(const JobLayout& layout, Deadline deadline);
  /// Whether the arena may take `op` at all: it exists, and no algorithm is forced for `op`.
  [[nodiscard]] bool arena_may_serve(const coll::OpDesc& op, const CollOptions& opts) const;
  /// Whether `op` runs through the arena (a host allreduce small enough, no algorithm forced).
  [[nodiscard]] bool uses_arena(const coll::OpDesc& op, const CollOptions& opts) const;
  /// Runs `op` through the arena in one step (ArenaTask), on this thread if the engine is idle.
  std::shared_ptr<OpState> launch_arena(const coll::OpDesc& op, Deadline deadline,
                                        Clock::time_point now);
  /// The elements per piece when `op` (above the one-step size) takes the arena in pieces
  /// (ArenaPiecesTask), else 0.
  [[nodiscard]] std::size_t arena_piece_elems(const coll::OpDesc& op,
                                              const CollOptions& opts) const;
  /// The communicator `d` describes (over this one's store unless `d` names another).
  Result<std::unique_ptr<CommImpl>> derive(Derivation d);
  /// Fails when a rank of `members` (this communicator's ranks) is known to have failed.
  [[nodiscard]] Status members_alive(const std::vector<int>& members) const;
  // Leaving (comm_lifecycle.cpp).
  /// The store's host waits until its peers no longer need the store for what it did.
  void linger_for_peers();
  void leave();
  /// The engine's idle check: messages of finished calls left unread.
  Status check_unread_messages();
  /// The engine's stall check: messages no call will take while a call waits.
  Status check_stalled_call();
  /// An operation's failure as reported: a peer that left because it had found a mismatched
  /// call is that Mismatch (its record, looked for briefly), not its closed connection.
  Status explain_failure(const Status& why);
  /// Also checks that every rank has the same device runtime (`dev`, may be null).
  Status agree_on_plan_settings(const std::string& prefix, const device::Device* dev,
                                Deadline deadline);
  /// Device buffers / a stream: stage through pinned host memory, ordered on the stream.
  std::shared_ptr<OpState> submit_on_stream(const coll::OpDesc& op, void* stream,
                                            std::shared_ptr<const algo::Plan> plan,
                                            Deadline deadline);
  /// Throws when no call may be made (aborted, failed, a bad per-call timeout).
  void check_usable(const CollOptions& opts) const;
  /// Numbers, validates, plans and queues one call. `fused`: the allreduce carries these calls
  /// of a group, packed (FusedAllreduceTask); `numbered`: a send / receive already numbered
  /// (when its group was recorded).
  std::shared_ptr<OpState> launch(coll::OpDesc op, const CollOptions& opts,
                                  const std::vector<FusedPiece>* fused = nullptr,
                                  bool numbered = false);

  // Grouped calls (group.cpp).
  Work record(coll::OpDesc op, const CollOptions& opts);
  /// At destruction inside an open group: its calls never run (logged; their Work fails).
  void drop_open_group();
  /// Runs the allreduces at `members` (indices into `group`) as one, packed.
  void launch_fused(std::vector<GroupMember>& group, const std::vector<std::size_t>& members);
  /// Runs the sends and receives at `members` side by side in one operation (per
  /// exec::kMaxExtraBufs / 2 calls); those that run stream-ordered (all on one stream) through
  /// one staging buffer.
  void launch_p2p_batch(std::vector<GroupMember>& group, const std::vector<std::size_t>& members);

  int rank_;
  int nranks_;
  std::uint64_t comm_id_;
  config::Config config_;
  CommSettings settings_;
  std::shared_ptr<bootstrap::Store> store_;
  std::shared_ptr<bootstrap::TcpStoreServer> server_;
  std::unique_ptr<PeerTransports> transports_;
  std::unique_ptr<transport::Arena> arena_;  // one host over shm: small allreduces (or null)
  std::unique_ptr<Planner> planner_;         // the selector and the plan cache (from connect())
  std::unique_ptr<std::uint8_t, void (*)(void*)> scratch_{nullptr, nullptr};
  std::size_t scratch_bytes_ = 0;
  std::unique_ptr<device::StreamPath> stream_path_;  // null without a device runtime
  std::unique_ptr<device::DirectPath> direct_;       // device buffers, one host: cuda_ipc (or null)
  CallLedger calls_;                                 // numbers, unfinished and recent calls
  int group_depth_ = 0;                  // group_start() nesting (calls come from one thread)
  std::vector<GroupMember> group_;       // calls recorded in the open group
  std::uint64_t group_collectives_ = 0;  // of which collectives (not sends / receives)
  std::atomic<bool> aborted_{false};
  std::atomic<exec::PlanRun*> spare_run_{nullptr};  // owned (reuse_run / recycle_run)
  std::atomic<ArenaTask*> spare_arena_{nullptr};    // owned: the last task finished inline
  mutable std::mutex abort_mu_;
  net::SocketAddress data_address_;   // this rank's tcp listener (derived comms bind its host)
  crypto::Secret secret_{};           // the job's secret (CommSetup::secret)
  std::function<Status()> liveness_;  // CommSetup::liveness, while being created
  /// The failure monitor, split and shrink: outlives the engine (which reports to it).
  std::unique_ptr<Reliability> reliability_;
  std::unique_ptr<exec::Engine> engine_;  // last: destroyed first, after draining its queue
};

}  // namespace loom::detail
