// TcpStoreServer's GATHER: a rank publishes its value with SET under prefix/rank, then one
// GATHER waits, parked at the server, until all n keys exist and answers them all in rank order.
// An allgather thus costs the server 2n requests instead of n^2 gets. Each prefix's state counts
// the keys present as they are set (O(1) per SET), so a gather never rescans the key space.
#include <charconv>
#include <string>

#include "bootstrap/tcp_store_loop.hpp"
#include "log/log.hpp"

namespace loom::bootstrap::server {
namespace {

std::string rank_key(const std::string& prefix, int r) {
  return prefix + "/" + std::to_string(r);
}

// "0-3, 7, 9-10", cut short (with "...") past the error limit.
std::string rank_ranges(const std::vector<bool>& present) {
  std::string out;
  const int n = static_cast<int>(present.size());
  for (int r = 0; r < n; ++r) {
    if (present[static_cast<std::size_t>(r)]) continue;
    int last = r;
    while (last + 1 < n && !present[static_cast<std::size_t>(last + 1)]) ++last;
    if (!out.empty()) out += ", ";
    out += last == r ? std::to_string(r) : fmt::format("{}-{}", r, last);
    if (out.size() > wire::kMaxErrorBytes - 16) return out + ", ...";
    r = last;
  }
  return out;
}

}  // namespace

Gather& Loop::gather_of(const std::string& prefix, int n) {
  auto [it, fresh] = gathers_.try_emplace(prefix);
  if (fresh) {
    it->second.n = n;
    count_gather(it->second, prefix);
  }
  return it->second;
}

void Loop::count_gather(Gather& g, const std::string& prefix) {
  g.present.assign(static_cast<std::size_t>(g.n), false);
  g.have = 0;
  g.answer_built = false;
  for (int r = 0; r < g.n; ++r)
    if (data_.contains(rank_key(prefix, r))) {
      g.present[static_cast<std::size_t>(r)] = true;
      ++g.have;
    }
}

const Bytes& Loop::gather_answer(Gather& g, const std::string& prefix) {
  if (g.answer_built) return g.answer;
  g.answer.clear();
  for (int r = 0; r < g.n; ++r) {
    const Bytes& v = data_[rank_key(prefix, r)].value;
    std::uint8_t len[4];
    wire::put_u32(len, static_cast<std::uint32_t>(v.size()));
    g.answer.insert(g.answer.end(), len, len + 4);
    g.answer.insert(g.answer.end(), v.begin(), v.end());
  }
  g.answer_built = true;
  return g.answer;
}

std::string Loop::gather_missing(const Gather& g) const {
  return rank_ranges(g.present);
}

void Loop::handle_gather(Conn& c, const wire::RequestHeader& h, std::string prefix) {
  ++served_.gathers;
  const int n = wire::gather_ranks(h.arg);
  Gather& g = gather_of(prefix, n);
  if (g.n != n) {
    reply_error(c, fmt::format("gather '{}' of {} ranks, while another rank gathers {} ranks",
                               prefix, n, g.n));
    return;
  }
  if (g.have == g.n) {
    const Bytes& answer = gather_answer(g, prefix);
    if (answer.size() > wire::kMaxGatherBytes) {
      reply_error(c, fmt::format("gather '{}': {} bytes exceed the limit of {}", prefix,
                                 answer.size(), wire::kMaxGatherBytes));
      return;
    }
    respond(c, wire::Reply::Ok, answer.size(), answer);
    return;
  }
  const std::uint32_t wait = wire::gather_wait_ms(h.arg);
  const bool ends_on_gone = wire::gather_ends_on_gone(h.arg);
  if (wait == 0 || untold_gone(c, ends_on_gone)) {
    const std::string missing = gather_missing(g);
    respond(c, wire::Reply::Timeout, missing.size(),
            std::span(reinterpret_cast<const std::uint8_t*>(missing.data()), missing.size()));
    return;
  }
  c.parked = true;
  c.parked_gather = true;
  c.ends_on_gone = ends_on_gone;
  c.parked_until =
      wait == wire::kGatherForever ? Clock::time_point::max() : Clock::now() + milliseconds(wait);
  c.parked_key = prefix;
  // Ids of waiters that left (timed out, dropped) stay until woken; prune them now and then.
  if (g.waiters.size() > 2 * static_cast<std::size_t>(g.n) + 16)
    std::erase_if(g.waiters, [&](std::uint64_t id) {
      auto it = conns_.find(id);
      return it == conns_.end() || !it->second->parked_gather;
    });
  g.waiters.push_back(c.id);
}

// A SET or ADD of `key`: when it is prefix/r of a gather in progress, count it, and answer the
// gather's waiters once the last one is in.
void Loop::note_gathered(const std::string& key) {
  if (gathers_.empty()) return;
  const auto slash = key.rfind('/');
  if (slash == std::string::npos || slash + 1 == key.size()) return;
  auto it = gathers_.find(key.substr(0, slash));
  if (it == gathers_.end()) return;
  int r = -1;
  const char* first = key.data() + slash + 1;
  const char* last = key.data() + key.size();
  auto [end, ec] = std::from_chars(first, last, r);
  if (ec != std::errc() || end != last || (*first == '0' && last - first > 1)) return;
  Gather& g = it->second;
  if (r < 0 || r >= g.n) return;
  g.answer_built = false;  // a value changed
  if (!g.present[static_cast<std::size_t>(r)]) {
    g.present[static_cast<std::size_t>(r)] = true;
    ++g.have;
  }
  if (g.have < g.n || g.waiters.empty()) return;
  const Bytes& answer = gather_answer(g, it->first);
  std::vector<std::uint64_t> waiters;
  waiters.swap(g.waiters);
  for (std::uint64_t id : waiters) {
    auto w = conns_.find(id);
    if (w == conns_.end() || w->second->dead || !w->second->parked_gather ||
        w->second->parked_key != it->first)
      continue;
    Conn& c = *w->second;
    c.parked = c.parked_gather = false;
    c.parked_key.clear();
    if (answer.size() > wire::kMaxGatherBytes)
      reply_error(c, fmt::format("gather '{}': {} bytes exceed the limit of {}", it->first,
                                 answer.size(), wire::kMaxGatherBytes));
    else
      respond(c, wire::Reply::Ok, answer.size(), answer);
    runnable_.push_back(id);
  }
}

bool Loop::untold_gone(Conn& c, bool ends_on_gone) {
  if (!ends_on_gone || static_cast<std::uint64_t>(gone_count_) <= c.gone_told) return false;
  c.gone_told = static_cast<std::uint64_t>(gone_count_);
  return true;
}

// A client vanished: the gets and gathers parked with kEndsOnGone end now (Timeout; a gather's
// with the ranks still missing), so that their callers check at once whether a member died
// instead of asking the server every few hundred milliseconds.
void Loop::end_waits_on_gone() {
  for (auto& [id, c] : conns_) {
    if (c->dead || !c->parked || !c->ends_on_gone || !c->watch_keys.empty()) continue;
    std::string missing;
    if (c->parked_gather) {
      auto g = gathers_.find(c->parked_key);
      if (g != gathers_.end()) missing = gather_missing(g->second);
    }
    c->gone_told = static_cast<std::uint64_t>(gone_count_);
    unpark(*c);
    respond(*c, wire::Reply::Timeout, missing.size(),
            std::span(reinterpret_cast<const std::uint8_t*>(missing.data()), missing.size()));
    runnable_.push_back(id);
  }
}

// ERASE removed keys under `erased_prefix`: the gathers whose keys it covered count again.
void Loop::recount_gathers(const std::string& erased_prefix) {
  for (auto& [prefix, g] : gathers_) {
    const std::string under = prefix + "/";
    if (under.starts_with(erased_prefix) || erased_prefix.starts_with(under))
      count_gather(g, prefix);
  }
  std::erase_if(gathers_,
                [](const auto& kv) { return kv.second.have == 0 && kv.second.waiters.empty(); });
}

StoreLoad Loop::load() const {
  return {served_.requests.load(std::memory_order_relaxed),
          served_.gathers.load(std::memory_order_relaxed),
          served_.hellos.load(std::memory_order_relaxed),
          served_.bytes_out.load(std::memory_order_relaxed)};
}

void Loop::log_served() const {
  const auto& op = served_.by_op;
  LOOM_LOG_INFO(Bootstrap,
                "rendezvous server at {}: served {} requests ({} gathers) and {} hellos, sent {} "
                "bytes, for a job of {} members (set {}, get {}, add {}, erase {}, gone {}, "
                "watch {})",
                addr_, served_.requests.load(), served_.gathers.load(), served_.hellos.load(),
                served_.bytes_out.load(), members(), op[1].load(), op[2].load(), op[3].load(),
                op[4].load(), op[5].load(), op[8].load());
}

}  // namespace loom::bootstrap::server
