#include "core/call_ledger.hpp"

#include <fmt/format.h>

#include "common/status.hpp"

namespace loom::detail {

void CallLedger::number_collective(coll::OpDesc& op) {
  op.seq = next_seq_++;
  throw_if_error(coll::validate(op, rank_, nranks_));
}

void CallLedger::number_p2p(coll::OpDesc& op) {
  op.seq = next_seq_.load();
  if (p2p_sent_.empty()) {
    p2p_sent_.assign(static_cast<std::size_t>(nranks_), 0);
    p2p_received_.assign(static_cast<std::size_t>(nranks_), 0);
  }
  auto at = [](std::vector<std::uint64_t>& v, int peer) -> std::uint64_t* {
    return peer >= 0 && peer < static_cast<int>(v.size()) ? &v[static_cast<std::size_t>(peer)]
                                                          : nullptr;
  };
  std::uint64_t* sent = at(p2p_sent_, op.p2p.to);
  std::uint64_t* received = at(p2p_received_, op.p2p.from);
  op.p2p.send_seq = sent ? *sent : 0;
  op.p2p.recv_seq = received ? *received : 0;
  throw_if_error(coll::validate(op, rank_, nranks_));
  if (sent) ++*sent;
  if (received) ++*received;
}

void CallLedger::submitted(const coll::OpDesc& op) {
  std::lock_guard lk(mu_);
  unfinished_.push_back(op.seq);
  calls_[op.seq % kHistory] = Record{op.seq, op};
}

void CallLedger::remember(const coll::OpDesc& op) {
  std::lock_guard lk(mu_);
  calls_[op.seq % kHistory] = Record{op.seq, op};
}

void CallLedger::completed(std::uint64_t seq) {
  last_completed_.store(static_cast<std::int64_t>(seq));
  std::lock_guard lk(mu_);
  while (!unfinished_.empty() && unfinished_.front() <= seq) unfinished_.pop_front();
}

std::optional<std::string> CallLedger::describe(std::uint64_t seq) const {
  std::lock_guard lk(mu_);
  return describe_locked(seq);
}

std::optional<std::string> CallLedger::describe_locked(std::uint64_t seq) const {
  const Record& c = calls_[seq % kHistory];
  if (c.seq != seq) return std::nullopt;
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
    // More than kHistory calls in flight: the oldest is no longer remembered in full.
    p.current = describe_locked(oldest).value_or(fmt::format("call #{}", oldest));
  }
  return p;
}

}  // namespace loom::detail
