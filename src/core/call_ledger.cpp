#include "core/call_ledger.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstring>

#include "common/status.hpp"

namespace loom::detail {

void CallLedger::number_collective(coll::OpDesc& op) {
  op.seq = next_seq_++;
  Status valid = coll::validate(op, rank_, nranks_);
  if (!valid.is_ok()) refused(op, valid);
  throw_if_error(valid);
}

// The number stays taken (the other ranks' call of that number waits for this one): remembered
// with why, so that comparing calls names it.
void CallLedger::refused(const coll::OpDesc& op, const Status& why) {
  std::lock_guard lk(mu_);
  CallRecord& r = slot(op.seq);
  r.seq = op.seq;
  r.op = op;
  r.algorithm.fill('\0');
  std::memcpy(r.algorithm.data(), kRefused.data(), kRefused.size());
  r.submitted_ns = r.started_ns = r.completed_ns = 0;
  refusals_[op.seq] = std::string(why.message());
  while (refusals_.size() > 16) refusals_.erase(refusals_.begin());
}

void CallLedger::number_p2p(coll::OpDesc& op) {
  op.seq = next_seq_.load();
  coll::P2PDesc& p = op.p2p;
  auto in_range = [&](int peer) { return peer >= 0 && peer < nranks_; };
  std::lock_guard lk(p2p_mu_);
  const bool any = p.any_source;
  const bool defer = any || (in_range(p.from) && unnumbered_ > 0);
  if (in_range(p.to)) p.send_seq = p2p_sent_[static_cast<std::size_t>(p.to)];
  if (in_range(p.from) && !defer) p.recv_seq = p2p_received_[static_cast<std::size_t>(p.from)];
  p.recv_deferred = defer && !any;
  throw_if_error(coll::validate(op, rank_, nranks_));
  if (in_range(p.to)) ++p2p_sent_[static_cast<std::size_t>(p.to)];
  if (defer)
    ++unnumbered_;
  else if (in_range(p.from))
    ++p2p_received_[static_cast<std::size_t>(p.from)];
}

std::uint64_t CallLedger::next_receive(int peer) const {
  std::lock_guard lk(p2p_mu_);
  return p2p_received_[static_cast<std::size_t>(peer)];
}

std::uint64_t CallLedger::claim_receive(int peer) {
  std::lock_guard lk(p2p_mu_);
  if (unnumbered_ > 0) --unnumbered_;
  return p2p_received_[static_cast<std::size_t>(peer)]++;
}

namespace {

std::int64_t ns_of(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace

std::int64_t CallLedger::now_ns() const {
  return timed_ ? ns_of(std::chrono::steady_clock::now()) : 0;
}

void CallLedger::submitted(const coll::OpDesc& op, std::string_view algorithm,
                           std::chrono::steady_clock::time_point now_time) {
  const std::int64_t now = timed_ ? ns_of(now_time) : 0;
  std::lock_guard lk(mu_);
  unfinished_.push_back(op.seq);
  record_locked(op, algorithm, now);
}

CallRecord& CallLedger::record_locked(const coll::OpDesc& op, std::string_view algorithm,
                                      std::int64_t submitted_ns) {
  CallRecord& r = slot(op.seq);
  r.seq = op.seq;
  r.op = op;
  r.algorithm.fill('\0');
  std::memcpy(r.algorithm.data(), algorithm.data(),
              std::min(algorithm.size(), r.algorithm.size() - 1));
  r.submitted_ns = submitted_ns;
  r.started_ns = 0;
  r.completed_ns = 0;
  return r;
}

void CallLedger::complete_locked(std::uint64_t seq, std::int64_t now) {
  while (!unfinished_.empty() && unfinished_.front() <= seq) {
    CallRecord& r = slot(unfinished_.front());
    if (r.seq == unfinished_.front()) {
      if (r.started_ns == 0) r.started_ns = now;
      r.completed_ns = now;
    }
    unfinished_.pop_front();
  }
}

void CallLedger::started(std::uint64_t seq) {
  last_started_.store(static_cast<std::int64_t>(seq), std::memory_order_relaxed);
  if (!timed_) return;
  const std::int64_t now = now_ns();
  std::lock_guard lk(mu_);
  CallRecord& r = slot(seq);
  if (r.seq == seq && r.started_ns == 0) r.started_ns = now;
}

void CallLedger::remember(const coll::OpDesc& op) {
  const std::int64_t now = now_ns();
  std::lock_guard lk(mu_);
  CallRecord& r = slot(op.seq);
  r.seq = op.seq;
  r.op = op;
  r.algorithm.fill('\0');
  r.submitted_ns = r.started_ns = r.completed_ns = now;
}

void CallLedger::completed(std::uint64_t seq) {
  last_completed_.store(static_cast<std::int64_t>(seq));
  const std::int64_t now = now_ns();
  std::lock_guard lk(mu_);
  complete_locked(seq, now);
}

void CallLedger::ran(const coll::OpDesc& op, std::string_view algorithm,
                     std::chrono::steady_clock::time_point now_time) {
  const auto seq = static_cast<std::int64_t>(op.seq);
  last_started_.store(seq, std::memory_order_relaxed);
  last_completed_.store(seq);
  // No clock reading of its own (one costs 25-50 ns on a VM, a tenth of such a call): the call
  // took at most the inline budget (kInlineSpin, 2 us), below what a flight record resolves.
  const std::int64_t now = timed_ ? ns_of(now_time) : 0;
  std::lock_guard lk(mu_);
  complete_locked(op.seq, now);  // nothing: the engine was idle
  CallRecord& r = record_locked(op, algorithm, now);
  r.started_ns = r.completed_ns = now;
}

std::uint64_t CallLedger::p2p_submitted(const coll::OpDesc& op,
                                        std::chrono::steady_clock::time_point now_time) {
  const std::int64_t now = timed_ ? ns_of(now_time) : 0;
  std::lock_guard lk(mu_);
  const std::uint64_t id = next_p2p_++;
  P2PRecord& r = p2p_[id % p2p_.size()];
  r.id = id;
  r.op = op;
  r.submitted_ns = now;
  r.started_ns = 0;
  r.completed_ns = 0;
  r.started = r.completed = false;
  return id;
}

P2PRecord* CallLedger::p2p_record(std::uint64_t id) {
  P2PRecord& r = p2p_[id % p2p_.size()];
  return r.id == id ? &r : nullptr;  // null: forgotten already
}

void CallLedger::p2p_started(const coll::OpDesc& op) {
  const std::int64_t now = now_ns();
  std::lock_guard lk(mu_);
  P2PRecord* r = p2p_record(op.p2p.record);
  if (r == nullptr) return;
  r->op.p2p = op.p2p;  // the receive's number and sender, known now
  if (!r->started) r->started_ns = now;
  r->started = true;
}

void CallLedger::p2p_completed(std::uint64_t id) {
  const std::int64_t now = now_ns();
  std::lock_guard lk(mu_);
  P2PRecord* r = p2p_record(id);
  if (r == nullptr) return;
  if (!r->started) r->started_ns = now;
  r->completed_ns = now;
  r->started = r->completed = true;
}

std::vector<P2PRecord> CallLedger::recent_p2p() const {
  std::lock_guard lk(mu_);
  const std::uint64_t n = p2p_.size();
  std::vector<P2PRecord> out;
  out.reserve(static_cast<std::size_t>(std::min(next_p2p_, n)));
  for (std::uint64_t i = next_p2p_ > n ? next_p2p_ - n : 0; i < next_p2p_; ++i)
    if (p2p_[i % n].id == i) out.push_back(p2p_[i % n]);
  return out;
}

std::optional<std::string> CallLedger::unfinished_p2p() const {
  const std::vector<P2PRecord> all = recent_p2p();  // for status(): off the hot path
  const P2PRecord* oldest = nullptr;
  std::size_t more = 0;
  for (const P2PRecord& r : all) {
    if (r.completed) continue;
    if (oldest == nullptr)
      oldest = &r;
    else
      ++more;
  }
  if (oldest == nullptr) return std::nullopt;
  std::string s =
      fmt::format("{} ({})", coll::describe(oldest->op), oldest->started ? "running" : "queued");
  if (more > 0) s += fmt::format(" and {} more", more);
  return s;
}

std::vector<CallRecord> CallLedger::recent() const {
  std::lock_guard lk(mu_);
  const std::uint64_t end = next_seq_.load();
  const std::uint64_t n = calls_.size();
  std::vector<CallRecord> out;
  out.reserve(static_cast<std::size_t>(std::min(end, n)));
  for (std::uint64_t s = end > n ? end - n : 0; s < end; ++s)
    if (slot(s).seq == s) out.push_back(slot(s));
  return out;
}

std::optional<std::string> CallLedger::describe(std::uint64_t seq) const {
  std::lock_guard lk(mu_);
  return describe_locked(seq);
}

std::optional<std::string> CallLedger::describe_locked(std::uint64_t seq) const {
  const CallRecord& c = slot(seq);
  if (c.seq != seq) return std::nullopt;
  if (std::string_view(c.algorithm.data()) == kRefused)
    if (auto it = refusals_.find(seq); it != refusals_.end())
      return fmt::format("{}, refused at the call ({})", coll::describe(c.op), it->second);
  return coll::describe(c.op);
}

RankProgress CallLedger::progress() const {
  RankProgress p;
  p.submitted = static_cast<std::int64_t>(next_seq_.load()) - 1;
  p.completed = last_completed_.load();
  std::lock_guard lk(mu_);
  if (!unfinished_.empty()) {
    const std::uint64_t oldest = unfinished_.front();
    p.current_seq = static_cast<std::int64_t>(oldest);
    // More calls in flight than remembered: the oldest is no longer remembered in full.
    p.current = describe_locked(oldest).value_or(fmt::format("call #{}", oldest));
  }
  return p;
}

}  // namespace loom::detail
