#include "tools/loom_trace/p2p_report.hpp"

#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>

namespace loom::trace {

namespace {

// What a rank did last: its newest collective call or send/receive, with its state.
std::string last_call(const RankRecord& rec) {
  const Call* c = rec.calls.empty() ? nullptr : &rec.calls.back();
  const P2P* p = rec.p2p.empty() ? nullptr : &rec.p2p.back();
  if (c != nullptr && (p == nullptr || c->submitted >= p->submitted))
    return fmt::format("{}, {}", c->call, c->state);
  if (p != nullptr) return fmt::format("{}, {}", p->call, p->state);
  return "none recorded";
}

// The other side of rank `r`'s unfinished send (`send`) or receive `d`, from the peer's record.
void other_side(const CommRecords& comm, int r, bool send, const P2P::Dir& d, const P2P& mine,
                std::ostream& out) {
  if (d.peer < 0) {
    fmt::print(out, "; from any source: no sender found yet (tag {})", mine.tag);
    return;
  }
  auto it = comm.ranks.find(d.peer);
  if (it == comm.ranks.end()) {
    fmt::print(out, "; rank {} wrote no record", d.peer);
    return;
  }
  const RankRecord& peer = it->second;
  const char* they = send ? "receive" : "send";
  if (d.seq < 0) {
    fmt::print(out, "; its number from rank {} was not known yet", d.peer);
  } else if (const P2P* m = peer.find_p2p(!send, r, d.seq)) {
    const P2P::Dir& md = send ? *m->recv : *m->send;
    fmt::print(out, "; rank {}'s matching {}: {}, {}", d.peer, they, m->call, m->state);
    if (md.count != d.count || m->tag != mine.tag || m->dtype != mine.dtype)
      fmt::print(out, " (the two differ: {} x {} tag {} against {} x {} tag {})", d.count,
                 mine.dtype, mine.tag, md.count, m->dtype, m->tag);
  } else {
    const auto [top, n] = peer.p2p_span(!send, r);
    if (n == 0)
      fmt::print(out, "; rank {} recorded no {} {} rank {}", d.peer, they, send ? "from" : "to", r);
    else
      fmt::print(out, "; rank {} never {} #{} ({} up to #{} {} rank {})", d.peer,
                 send ? "posted the receive" : "sent", d.seq, send ? "received" : "sent", top,
                 send ? "from" : "to", r);
    fmt::print(out, " (rank {}'s last call: {})", d.peer, last_call(peer));
  }
}

}  // namespace

bool p2p_stalls(const CommRecords& comm, std::ostream& out, int top) {
  int found = 0;
  for (const auto& [r, rec] : comm.ranks) {
    for (const P2P& p : rec.p2p) {
      if (p.state == "completed") continue;
      if (found++ >= top) continue;
      const std::int64_t since = p.started != 0 ? p.started : p.submitted;
      fmt::print(out, "  P2P STALLED: rank {} in {} ({}, for {} when recorded)", r, p.call, p.state,
                 milliseconds(rec.written - since));
      if (p.recv) other_side(comm, r, false, *p.recv, p, out);
      if (p.send) other_side(comm, r, true, *p.send, p, out);
      fmt::print(out, "\n");
    }
  }
  if (found > top)
    fmt::print(out, "  ... and {} more unfinished sends and receives\n", found - top);
  return found > 0;
}

}  // namespace loom::trace
