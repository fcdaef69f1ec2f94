// The communicator's record of its calls: their numbers (collectives in call order, sends and
// receives per peer and direction), which are unfinished, and the last ones made, so that a
// stalled or mismatched call can be named (by the failure monitor, the status report and the
// unread-message check), with when each was submitted, started and completed (the flight
// record, flight_record.hpp). Thread-safe: calls are recorded by the calling thread and started
// and completed by the driving one.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "collective/op.hpp"
#include "core/failure_monitor.hpp"

namespace loom::detail {

/// One recorded collective call: what it was and when (steady-clock nanoseconds, 0: not yet).
struct CallRecord {
  std::uint64_t seq = ~std::uint64_t{0};
  coll::OpDesc op;
  std::array<char, 24> algorithm{};  // the plan's ("ring"), empty for a call with nothing to do
  std::int64_t submitted_ns = 0;
  std::int64_t started_ns = 0;
  std::int64_t completed_ns = 0;
};

/// One recorded send, receive or sendrecv (one call), by this rank's p2p call number `id`. The
/// op carries the peers and the per-peer message numbers (op.p2p.send_seq / recv_seq; a receive
/// from any source has from == -1 until it finds its sender).
struct P2PRecord {
  std::uint64_t id = ~std::uint64_t{0};
  coll::OpDesc op;
  std::int64_t submitted_ns = 0;
  std::int64_t started_ns = 0;
  std::int64_t completed_ns = 0;
  bool started = false;  // (also without times: LOOM_FLIGHT_RECORDER=0)
  bool completed = false;
};

class CallLedger {
 public:
  static constexpr std::size_t kDefaultHistory = 256;  // LOOM_FLIGHT_RECORDER's default

  /// Remembers the last `history` collective calls (at least 16), with their times unless
  /// `timed` is false (LOOM_FLIGHT_RECORDER=0: two clock readings and a lock fewer per call).
  CallLedger(int rank, int nranks, std::size_t history = kDefaultHistory, bool timed = true)
      : rank_(rank),
        nranks_(nranks),
        timed_(timed),
        p2p_sent_(static_cast<std::size_t>(nranks), 0),
        p2p_received_(static_cast<std::size_t>(nranks), 0),
        calls_(std::max<std::size_t>(history, 16)),
        p2p_(calls_.size()) {}

  /// The number the next collective call will take.
  [[nodiscard]] std::uint64_t next_seq() const { return next_seq_.load(); }
  /// Numbers and validates a collective call (throws loom::Error when it is invalid).
  void number_collective(coll::OpDesc& op);
  /// Numbers a send / receive per peer and direction, after validating it (a refused call takes
  /// no number, so both sides stay in step). Throws loom::Error when it is invalid. A receive
  /// from any source takes its number when it finds its sender (claim_receive); so does every
  /// receive submitted while one is unnumbered (op.p2p.recv_deferred): operations start in
  /// submission order, so numbering at the start keeps the per-peer order.
  void number_p2p(coll::OpDesc& op);
  /// The number of the next receive from `peer` (what its next message must carry).
  [[nodiscard]] std::uint64_t next_receive(int peer) const;
  /// Numbers a deferred receive, or a receive from any source that found `peer`, as it starts.
  /// (One that fails before it starts fails the communicator: every later call fails too.)
  std::uint64_t claim_receive(int peer);

  /// A numbered collective call was queued at `now`, to run as `algorithm`: unfinished until
  /// completed(op.seq).
  void submitted(const coll::OpDesc& op, std::string_view algorithm,
                 std::chrono::steady_clock::time_point now);
  /// Collective call `seq` started running (its turn came on the driving thread).
  void started(std::uint64_t seq);
  /// The last collective call that started running or completed (-1: none): every call issued
  /// before it has finished (operations run one at a time, in call order).
  [[nodiscard]] std::int64_t last_reached() const {
    return std::max(last_started_.load(std::memory_order_relaxed), last_completed());
  }
  /// A numbered collective call that needed no operation (zero bytes): remembered, finished.
  void remember(const coll::OpDesc& op);
  /// Collective call `seq` (and every one before it) completed.
  void completed(std::uint64_t seq);
  /// A numbered collective call submitted at `now`, as `algorithm`, that started at once and
  /// completed within microseconds, on the caller's thread (every call before it had completed):
  /// submitted, started and completed in one update (one lock, no clock reading: all three at
  /// `now`), for the small calls whose bookkeeping would otherwise cost as much as their data.
  void ran(const coll::OpDesc& op, std::string_view algorithm,
           std::chrono::steady_clock::time_point now);
  [[nodiscard]] std::int64_t last_completed() const { return last_completed_.load(); }

  /// A numbered send / receive was queued at `now`: records it, and returns its record's id
  /// (for op.p2p.record).
  std::uint64_t p2p_submitted(const coll::OpDesc& op, std::chrono::steady_clock::time_point now);
  /// The p2p call op.p2p.record started (with its receive numbered, its sender found).
  void p2p_started(const coll::OpDesc& op);
  /// The p2p call `id` completed.
  void p2p_completed(std::uint64_t id);

  /// "reduce #3 (4 x float32, sum, root 1)", nullopt if not made or long forgotten.
  [[nodiscard]] std::optional<std::string> describe(std::uint64_t seq) const;
  /// Submitted / completed / oldest unfinished call (RankProgress::derived is left 0).
  [[nodiscard]] RankProgress progress() const;
  /// The calls still remembered, oldest first.
  [[nodiscard]] std::vector<CallRecord> recent() const;
  /// The sends and receives still remembered (as many as collective calls), oldest first.
  [[nodiscard]] std::vector<P2PRecord> recent_p2p() const;
  /// The oldest remembered send / receive not completed ("recv #3 from rank 0 (...)", with
  /// "and N more" when there are), nullopt when none.
  [[nodiscard]] std::optional<std::string> unfinished_p2p() const;

 private:
  int rank_;
  int nranks_;
  bool timed_;
  std::atomic<std::uint64_t> next_seq_{0};
  mutable std::mutex p2p_mu_;  // receives are numbered by the calling or the driving thread
  std::vector<std::uint64_t> p2p_sent_, p2p_received_;  // per peer
  std::size_t unnumbered_ = 0;  // receives submitted, to be numbered when they start
  std::atomic<std::int64_t> last_completed_{-1};
  std::atomic<std::int64_t> last_started_{-1};
  mutable std::mutex mu_;
  // Submitted, not completed: their numbers, described from calls_ only when asked (formatting
  // every call's description costs more than the rest of a small collective's path).
  std::deque<std::uint64_t> unfinished_;
  std::vector<CallRecord> calls_;  // call #s at s % calls_.size() (mu_)
  std::vector<P2PRecord> p2p_;     // p2p call #i at i % p2p_.size() (mu_)
  std::uint64_t next_p2p_ = 0;     // (mu_)

  /// A collective call that failed validation: it keeps its number, and is described with why.
  void refused(const coll::OpDesc& op, const Status& why);
  static constexpr std::string_view kRefused = "refused";  // its CallRecord::algorithm
  std::map<std::uint64_t, std::string> refusals_;          // why each was refused (mu_)

  /// Writes call op.seq's record (not started, not completed) (mu_).
  CallRecord& record_locked(const coll::OpDesc& op, std::string_view algorithm,
                            std::int64_t submitted_ns);
  /// Calls up to `seq` that are unfinished completed at `now` (mu_).
  void complete_locked(std::uint64_t seq, std::int64_t now);
  [[nodiscard]] std::optional<std::string> describe_locked(std::uint64_t seq) const;
  [[nodiscard]] std::int64_t now_ns() const;
  CallRecord& slot(std::uint64_t seq) { return calls_[seq % calls_.size()]; }
  P2PRecord* p2p_record(std::uint64_t id);  // (mu_)
  [[nodiscard]] const CallRecord& slot(std::uint64_t seq) const {
    return calls_[seq % calls_.size()];
  }
};

}  // namespace loom::detail
