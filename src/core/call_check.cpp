// CommImpl: mismatched calls that no message header check catches (docs/reliability.md).
// A receiver compares every arriving message's tag with the call it expects, but some mismatched
// calls never receive a wrong message: their messages are all sent eagerly and left unread (a
// broadcast on one rank while the others reduce to it), or ranks wait for each other with no
// message at all (reduces with different roots). The first kind is found here: a message of a
// call this rank has finished is one no call will receive; it is looked for when the
// communicator is idle, after a barrier and at destruction. The second kind is found by the
// failure monitor, which compares the identities of stalled calls (describe_call) between ranks
// through the store.
#include "core/arena_task.hpp"
#include "core/comm_impl.hpp"

namespace loom::detail {

Status CommImpl::find_unread_messages(std::uint64_t upto) {
  if (!transports_) return Status::ok();
  for (int p = 0; p < nranks_; ++p) {
    transport::Connection* c = p == rank_ ? nullptr : transports_->get(p);
    if (c == nullptr) continue;
    std::optional<transport::Unread> u = c->peek_unread();
    if (!u || u->tag.seq > upto) continue;
    // A send not yet received is not a mismatch: its receive may come later.
    if (u->tag.kind == static_cast<std::uint8_t>(coll::CollKind::P2P)) continue;
    std::optional<std::string> mine = calls_.describe(u->tag.seq);
    return Status(ErrorCode::Mismatch,
                  fmt::format("rank {}: mismatched collective calls: rank {} sent {} ({} bytes) "
                              "to rank {}, whose call #{} was {} and took no such message (left "
                              "unread)",
                              rank_, p, transport::describe_tag(u->tag), u->length, rank_,
                              u->tag.seq, mine ? *mine : "not remembered"))
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
  return find_unread_messages(static_cast<std::uint64_t>(done));
}

}  // namespace loom::detail
