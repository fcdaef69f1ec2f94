// FailureMonitor: the stall check for mismatched calls that exchange no message (reduces with
// different roots wait for each other; no header is ever compared). Off the fast path: it runs in
// the monitor's thread, and talks to the store only once an operation has waited longer than
// LOOM_MISMATCH_CHECK_AFTER.
//
// Protocol (keys under the monitor's prefix; one set of keys per checked sequence number s):
//  - a rank whose operation #s has waited too long increments "call/s/asked"; the first posts a
//    status request "check calls #s", which every rank's monitor reads;
//  - each rank that has reached #s (now, or later: a slow rank compares when it gets there)
//    increments "call/s/n": the first publishes "<rank>\n<its call #s>" as "call/s/first", every
//    other one compares its own call #s with it;
//  - a rank whose call differs posts a Mismatch record naming both ranks and both calls, which
//    fails the operation on every rank.
// A rank that has not reached #s is never compared: a slow peer is not a mismatch.
// Cost: the ranks of a big job stall together (a slow collective), so each asks only after its
// own delay, spread over up to 1 s (8 ms per rank), and not at all once another rank's request
// for #s has reached it (pushed by the watch): a few "asked" increments per check, not n, then
// 2 requests per rank to compare and 1 to read the request.
#include <charconv>
#include <chrono>
#include <span>

#include "core/failure_monitor.hpp"
#include "log/log.hpp"

namespace loom::detail {
namespace {

using bootstrap::as_bytes;
using bootstrap::as_text;

constexpr std::string_view kCheckRequest = "check calls #";
constexpr std::size_t kMaxChecks = 1024;  // pending checks kept (one per stalled operation)

}  // namespace

std::string encode_call_check_request(std::int64_t seq) {
  return fmt::format("{}{}", kCheckRequest, seq);
}

std::optional<std::int64_t> decode_call_check_request(std::string_view text) {
  if (text.substr(0, kCheckRequest.size()) != kCheckRequest) return std::nullopt;
  text.remove_prefix(kCheckRequest.size());
  std::int64_t seq = -1;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), seq);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || seq < 0)
    return std::nullopt;
  return seq;
}

bool FailureMonitor::take_call_check_request(std::string_view text) {
  std::optional<std::int64_t> seq = decode_call_check_request(text);
  if (!seq) return false;
  if (call_checks_.size() >= kMaxChecks) call_checks_.erase(call_checks_.begin());
  call_checks_.emplace(*seq, 0);
  return true;
}

void FailureMonitor::check_calls() {
  if (!hooks_.call || hooks_.check_calls_after.count() <= 0 || store_broken_) return;
  if (!first_failure().is_ok()) return;  // every operation fails anyway
  const RankProgress p = hooks_.progress();
  const auto now = std::chrono::steady_clock::now();
  if (p.current_seq != stalled_seq_) {
    stalled_seq_ = p.current_seq;
    stalled_since_ = now;
  } else if (stalled_seq_ > checked_seq_ &&
             now - stalled_since_ >= hooks_.check_calls_after + ask_delay_) {
    // Another rank's request for this call, read already: it is compared as one, not asked for.
    if (call_checks_.contains(stalled_seq_))
      checked_seq_ = stalled_seq_;
    else
      start_call_check(stalled_seq_, now - stalled_since_);
  }
  for (auto it = call_checks_.begin(); it != call_checks_.end() && it->first <= p.submitted;) {
    if (!compare_call(it->first, it->second)) {
      ++it;
      continue;
    }
    it = call_checks_.erase(it);
    if (store_broken_ || !first_failure().is_ok()) return;
  }
}

void FailureMonitor::start_call_check(std::int64_t seq,
                                      std::chrono::steady_clock::duration waited) {
  checked_seq_ = seq;
  LOOM_LOG_INFO(Coll,
                "rank {}: operation #{} has waited {} ms (LOOM_MISMATCH_CHECK_AFTER): comparing "
                "the ranks' calls #{}",
                rank_, seq, std::chrono::duration_cast<std::chrono::milliseconds>(waited).count(),
                seq);
  auto n = store_->add(fmt::format("{}call/{}/asked", prefix_, seq), 1);
  if (!n.is_ok()) {
    store_gone(n.status());
    return;
  }
  if (*n != 1) return;  // another rank asked: its request is read like this one would be
  auto req = store_->add(prefix_ + "status/count", 1);
  Status st = req.is_ok() ? store_->set(fmt::format("{}status/req/{}", prefix_, *req),
                                        as_bytes(encode_call_check_request(seq)))
                          : req.status();
  if (!st.is_ok())
    LOOM_LOG_WARN(Coll, "rank {}: could not ask the ranks to compare their calls #{}: {}", rank_,
                  seq, st.message());
}

bool FailureMonitor::compare_call(std::int64_t seq, std::int64_t& claim) {
  const std::optional<std::string> mine = hooks_.call(seq);
  if (!mine) return true;  // not made by this rank, or too long ago to compare
  const std::string key = fmt::format("{}call/{}/", prefix_, seq);
  if (claim == 0) {
    auto n = store_->add(key + "n", 1);
    if (!n.is_ok()) return false;
    claim = *n;
    if (claim == 1) {
      (void)store_->set(key + "first", as_bytes(fmt::format("{}\n{}", rank_, *mine)));
      return true;
    }
  }
  auto got = store_->get(key + "first", Deadline::after(std::chrono::milliseconds(0)));
  if (!got.is_ok()) return false;  // claimed, not yet published: next round
  std::string_view first = as_text(*got);
  const std::size_t nl = first.find('\n');
  int other = -1;
  if (nl == std::string_view::npos ||
      std::from_chars(first.data(), first.data() + nl, other).ptr != first.data() + nl ||
      other < 0 || other >= nranks_ || other == rank_)
    return true;  // malformed: nothing to compare with
  const std::string_view theirs = first.substr(nl + 1);
  if (theirs == *mine) return true;
  FailureRecord r{ErrorCode::Mismatch, other, rank_,
                  fmt::format("rank {} called {}, but rank {} called {} (compared after an "
                              "operation waited longer than LOOM_MISMATCH_CHECK_AFTER)",
                              rank_, *mine, other, theirs)};
  apply(r);
  post(r);
  return true;
}

}  // namespace loom::detail
