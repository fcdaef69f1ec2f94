// CommImpl: mismatched calls that no message header check catches (docs/reliability.md).
// A receiver compares every arriving message's tag with the call it expects, but some mismatched
// calls never receive a wrong message: their messages are all sent eagerly and left unread (a
// broadcast on one rank while the others reduce to it), or ranks wait for each other with no
// message at all (reduces with different roots). The first kind is found here: a message of a
// call this rank has finished is one no call will receive; it is looked for when the
// communicator is idle, after a barrier and at destruction. The second kind is found by the
// failure monitor, which compares the identities of stalled calls (describe_call) between ranks
// through the store. Sends are checked against collectives the same way: a send's messages carry
// how many collectives its sender had issued before it (its epoch), so a message that no receive
// issued before this rank's collective of that number took, once this rank is past it, is one no
// call will receive; looked for at the same times, and while a call waits (check_stalled_call),
// where a receiver that runs a collective its sender has not reached would otherwise wait for the
// sender, and the sender for the receiver, until the deadline.
#include "core/arena_task.hpp"
#include "core/comm_impl.hpp"

namespace loom::detail {

Status CommImpl::find_unread_messages(std::int64_t finished, std::int64_t reached) {
  if (!transports_) return Status::ok();
  for (int p = 0; p < nranks_; ++p) {
    transport::Connection* c = p == rank_ ? nullptr : transports_->get(p);
    if (c == nullptr) continue;
    std::optional<transport::Unread> u = c->peek_unread();
    if (!u) continue;
    if (u->tag.kind == static_cast<std::uint8_t>(coll::CollKind::P2P)) {
      // A send issued before its sender's collective #e (tag.context == e) can be taken only by
      // a receive issued before this rank's collective #e; once this rank has reached it, none.
      const auto behind = static_cast<std::uint32_t>(reached) - u->tag.context;
      if (reached < 0 || behind >= 0x80000000u) continue;
      std::optional<std::string> mine = calls_.describe(u->tag.context);
      return Status(ErrorCode::Mismatch,
                    fmt::format("mismatched send/recv and collective order: rank {} sent {} ({} "
                                "bytes) before its collective #{}, but rank {} issued no receive "
                                "for it before its collective #{} ({}): a pair must issue its "
                                "sends, receives and collectives in the same order",
                                p, transport::describe_tag(u->tag), u->length, u->tag.context,
                                rank_, u->tag.context, mine ? *mine : "not remembered"))
          .with_peer(p);
    }
    if (finished < 0 || u->tag.seq > static_cast<std::uint64_t>(finished)) continue;
    std::optional<std::string> mine = calls_.describe(u->tag.seq);
    return Status(ErrorCode::Mismatch,
                  fmt::format("mismatched collective calls: rank {} sent {} ({} bytes) to rank "
                              "{}, whose call #{} was {} and took no such message (left unread)",
                              p, transport::describe_tag(u->tag), u->length, rank_, u->tag.seq,
                              mine ? *mine : "not remembered"))
        .with_peer(p);
  }
  return Status::ok();
}

Status CommImpl::check_unread_messages() {
  const std::int64_t done = calls_.last_completed();
  if (done < 0) return Status::ok();
  // The arena's last call: a rank that completed it without reading the others' slots (a
  // broadcast's root, a reduce's other ranks) compares them here.
  if (arena_)
    LOOM_RETURN_IF_ERROR(check_previous_arena_call(*arena_, rank_, nranks_)
                             .with_context(fmt::format("rank {}: the shared-memory arena", rank_)));
  return find_unread_messages(done, done).with_context(fmt::format("rank {}", rank_));
}

Status CommImpl::explain_failure(const Status& why) {
  // Long enough for the failure monitor's look at the records (a store round trip): a rank posts
  // its record before it closes its connections, and a rank that failed on another's record
  // closes them after that record was posted.
  constexpr auto kLook = std::chrono::milliseconds(500);
  if (why.code() != ErrorCode::PeerFailed || why.peer() < 0 || why.peer() == rank_ || !reliability_)
    return why;
  std::optional<Status> cause = reliability_->monitor().mismatch_cause(Deadline::after(kLook));
  if (!cause) return why;
  return Status(cause->code(), fmt::format("{} [then: {}]", cause->message(), why.message()))
      .with_peer(cause->peer());
}

Status CommImpl::check_stalled_call() {
  return find_unread_messages(calls_.last_completed(), calls_.last_reached());
}

}  // namespace loom::detail
