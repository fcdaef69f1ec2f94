// Failure sharing between the ranks of one communicator, out of band through the bootstrap
// store. A background thread per communicator (and a second one that waits on the store for a
// change: a WATCH parked at the server on its own connection, so while nothing fails the store
// hears from a rank once per kWatchPeriod instead of several times per loop):
//  - watches the store for failure records ("rank R failed", posted by whichever rank noticed:
//    a socket EOF/reset, a shared-memory peer whose process exited, a mismatched header) and
//    fails this rank's pending operations with the recorded cause;
//  - checks the processes of a few peers on this host (pidfd: the next kWatchedPeers ranks on
//    it, so each rank is watched by that many) and posts a record when one exits;
//  - answers status requests (hang attribution): when a rank times out it asks every rank which
//    operation it has reached and logs one report naming the ranks that lag behind;
//  - checks stalled calls: when this rank's operation has waited longer than
//    LOOM_MISMATCH_CHECK_AFTER, every rank that reaches that sequence number compares its call
//    with the first one published in the store (mismatched calls that exchange no message).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/store.hpp"
#include "bootstrap/tcp_store.hpp"
#include "common/status.hpp"

namespace loom::detail {

/// How long a failure monitor's store read whose answer decides whether a rank failed (its left
/// marker) waits for the store: as long as the store client waits for a watch's answer past its
/// end. A slow store is no evidence; a read past this is asked again later.
inline constexpr std::chrono::milliseconds kStoreGrace{30'000};

/// Who a rank is, for messages: exchanged once at init.
struct RankIdentity {
  std::string host;
  std::string host_id;  // equal on the ranks of one host
  pid_t pid = 0;
  std::uint64_t pid_ns = 0;
  bool serves_store = false;  // its process runs the communicator's rendezvous store
  std::string hostname{};     // as its process names its host (the store lists clients so)
};

/// One rank's answer to a status request.
struct RankProgress {
  std::int64_t submitted = -1;    // last submitted sequence number (-1: none)
  std::int64_t completed = -1;    // last completed sequence number (-1: none)
  std::int64_t current_seq = -1;  // the oldest unfinished operation (-1: idle)
  std::string current;            // its description
  std::int64_t derived = 0;       // split()/shrink() calls finished with this store
};

/// A failure as posted to the store: `code` of `rank`, noticed by `reporter`.
struct FailureRecord {
  ErrorCode code = ErrorCode::PeerFailed;
  int rank = -1;
  int reporter = -1;
  std::string message;
};

/// Text codecs of the store values (validated: garbage yields nullopt).
std::string encode_failure(const FailureRecord& r);
std::optional<FailureRecord> decode_failure(std::string_view text, int nranks);
std::string encode_progress(const RankProgress& p);
std::optional<RankProgress> decode_progress(std::string_view text);

/// The status request that asks every rank to compare its call #seq (failure_call_check.cpp).
std::string encode_call_check_request(std::int64_t seq);
std::optional<std::int64_t> decode_call_check_request(std::string_view text);

/// "0-2,4,6-7".
std::string format_rank_ranges(const std::vector<int>& ranks);

/// The one-line hang report, from every rank's answer (nullopt: no answer).
std::string hang_report(std::int64_t seq, const std::string& what,
                        const std::vector<std::optional<RankProgress>>& answers,
                        const std::vector<RankIdentity>& who);

class FailureMonitor {
 public:
  struct Hooks {
    std::function<void(const Status&)> fail;  // fails this rank's operations (non-blocking)
    std::function<RankProgress()> progress;   // this rank's progress (non-blocking)
    /// This rank's call #seq as text, nullopt if not made (or forgotten); null: no call check.
    std::function<std::optional<std::string>(std::int64_t seq)> call;
    /// How long an operation waits before the ranks compare their calls (0: never).
    std::chrono::milliseconds check_calls_after{0};
  };

  /// `store_host`: the rank whose process serves `store` (-1: none of this communicator's).
  FailureMonitor(std::shared_ptr<bootstrap::Store> store, std::string prefix, int rank,
                 std::vector<RankIdentity> ranks, Hooks hooks, int store_host = -1);
  ~FailureMonitor();
  FailureMonitor(const FailureMonitor&) = delete;
  FailureMonitor& operator=(const FailureMonitor&) = delete;

  /// An operation of this rank failed with `why` (called from the engine, under its lock: only
  /// queues). PeerFailed/Mismatch naming a peer are posted for the other ranks; a Timeout starts
  /// hang attribution. Returns `why`, naming the failed peer's host and pid.
  Status local_failure(const Status& why);
  /// `why` naming the failed peer's host and pid (PeerFailed naming a peer; else unchanged).
  [[nodiscard]] Status name_peer(const Status& why) const;
  /// This rank leaves cleanly (communicator destroyed): its exit is not a failure.
  void mark_left();
  /// After mark_left() and stop(): counts this rank out; the last rank to leave erases every
  /// key of the communicator (`comm_prefix`) from the store.
  void count_out(const std::string& comm_prefix);
  /// Waits until every other rank has left, failed, lost its store connection (not in
  /// `clients()`), or finished everything `mine` says this rank finished; returns the ranks
  /// still missing at `until`. For the rank whose process serves the store: its peers may still
  /// need the store for work this rank has completed.
  std::vector<int> wait_for_peers(
      const RankProgress& mine,
      const std::function<std::vector<bootstrap::StoreClientInfo>()>& clients, Deadline until);
  /// Finishes queued work (a hang report: bounded by 2 s), then stops the thread.
  void stop();
  /// Stops at once, dropping queued work (abort()).
  void stop_now();

  /// The first mismatched call any rank reported, as this rank states it: why a peer closed its
  /// connections (a rank that found one, or failed on another's report, leaves; its record
  /// reaches this rank around when its connections close). Looks at the store now and waits
  /// until `until` for the look to end; nullopt when no rank reported one.
  std::optional<Status> mismatch_cause(Deadline until);

  [[nodiscard]] std::vector<int> failed_ranks() const;
  [[nodiscard]] Status first_failure() const;
  /// The last hang report ("" if none).
  [[nodiscard]] std::string last_report() const;
  /// "rank 3 (host h1, pid 1234)".
  [[nodiscard]] std::string identify(int rank) const;

 private:
  void loop();
  /// The watcher thread: waits on `link_` for a failure record, a status request, a client gone
  /// or this rank's wake key, and flags a look at the store.
  void watch_store();
  void wake_watcher();
  void poll_store();
  void check_local_peers();
  void handle_local(const Status& why);
  void apply(const FailureRecord& r);
  [[nodiscard]] bool refuted(const FailureRecord& r) const;
  void post(const FailureRecord& r);
  void answer_status_requests();
  void check_gone();
  /// Posts a status request (quiet: the answering ranks log nothing); its number, or -1.
  std::int64_t request_status(bool quiet);
  /// Rank `r`'s answer to request `n` (nullopt: none yet), waiting at most `wait`.
  std::optional<RankProgress> status_answer(std::int64_t n, int r, std::chrono::milliseconds wait);
  /// Tells the rank that serves the store, waiting in wait_for_peers, that the others left.
  void tell_others_left();
  /// Whether rank `r` marked itself as left; nullopt when the store did not answer within
  /// `grace` (or is gone).
  [[nodiscard]] std::optional<bool> has_left(int r, std::chrono::milliseconds grace);
  [[nodiscard]] int rank_of(std::uint32_t pid, const std::string& host) const;
  void attribute_hang(const Status& why);
  bool gather_progress(std::vector<std::optional<RankProgress>>& answers, Deadline until);
  void check_calls();
  void start_call_check(std::int64_t seq, std::chrono::steady_clock::duration waited);
  /// A status request asking to compare calls: noted (true), or another request (false).
  bool take_call_check_request(std::string_view text);
  /// Compares this rank's call #seq with the one published first; true when done with it.
  bool compare_call(std::int64_t seq, std::int64_t& claim);
  [[nodiscard]] bool stopping() const;
  [[nodiscard]] bool has_work() const;
  void store_gone(const Status& why);

  std::shared_ptr<bootstrap::Store> store_;
  std::string prefix_;
  int rank_;
  int nranks_;
  std::vector<RankIdentity> ranks_;
  Hooks hooks_;
  int store_host_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Status> queue_;
  bool stop_ = false;
  bool stop_now_ = false;
  Status first_;
  std::atomic<bool> has_first_{false};  // !first_.is_ok(), read without the lock
  std::set<int> failed_;
  std::optional<Status> mismatch_;   // the first Mismatch another rank reported, stated here
  bool look_now_ = false;            // departure_cause() waits for a look at the store
  std::uint64_t looks_started_ = 0;  // the monitor's rounds of looks begun and ended
  std::uint64_t looks_ended_ = 0;
  std::string report_;

  // Owned by the thread.
  std::int64_t next_record_ = 1;
  std::int64_t next_request_ = 1;
  bool store_broken_ = false;
  std::set<int> gone_seen_;
  std::int64_t stalled_seq_ = -1;  // the operation in progress when last looked at
  std::chrono::steady_clock::time_point stalled_since_{};
  std::int64_t checked_seq_ = -1;  // the last stalled operation this rank asked to check
  // How much longer than LOOM_MISMATCH_CHECK_AFTER this rank waits before asking (spread over
  // the ranks; failure_call_check.cpp).
  std::chrono::steady_clock::duration ask_delay_{};
  std::map<std::int64_t, std::int64_t> call_checks_;  // seq -> claim number (0: not claimed yet)
  struct Watched;
  std::vector<std::unique_ptr<Watched>> watched_;
  std::shared_ptr<bootstrap::Store> link_;  // the watcher's own connection (null: poll)
  std::atomic<bool> watching_{false};       // false: the loop looks at the store every period
  std::atomic<bool> store_changed_{true};   // the watcher saw a change: look at the store
  std::thread watcher_;
  std::thread thread_;
};

}  // namespace loom::detail
