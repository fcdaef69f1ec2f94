// TcpStoreServer's requests: the key space, parked gets, per-rank quotas, erasing finished
// communicators' keys and the list of clients that vanished.
#include <algorithm>
#include <string>

#include "bootstrap/tcp_store_loop.hpp"
#include "log/log.hpp"

namespace loom::bootstrap::server {
namespace {

// What one key costs against its writer's quota beyond its bytes (the map's node, roughly).
constexpr std::size_t kEntryOverhead = 64;

std::size_t cost(const std::string& key, std::size_t value_bytes) {
  return key.size() + value_bytes + kEntryOverhead;
}

// Waits longer than ~10 years are "forever" (and cannot overflow the clock).
constexpr std::uint64_t kForeverMs = 10ull * 365 * 24 * 3600 * 1000;

}  // namespace

void Loop::dispatch(Conn& c, const wire::RequestHeader& h, std::string key,
                    std::span<const std::uint8_t> value) {
  ++served_.requests;
  ++served_.by_op[h.op];  // validated: 1 to 8
  switch (static_cast<wire::Op>(h.op)) {
    case wire::Op::Set: handle_set(c, std::move(key), value); return;
    case wire::Op::Add: handle_add(c, key, static_cast<std::int64_t>(h.arg)); return;
    case wire::Op::Get: handle_get(c, h, std::move(key)); return;
    case wire::Op::Erase: handle_erase(c, key); return;
    case wire::Op::Gone: handle_gone(c); return;
    case wire::Op::Bye: c.said_bye = true; return;
    case wire::Op::Gather: handle_gather(c, h, std::move(key)); return;
    case wire::Op::Watch: handle_watch(c, h, key); return;
  }
}

void Loop::reply_error(Conn& c, const std::string& msg) {
  const std::size_t n = std::min(msg.size(), wire::kMaxErrorBytes);
  respond(c, wire::Reply::Error, n,
          std::span(reinterpret_cast<const std::uint8_t*>(msg.data()), n));
}

// Charges `key`'s new size to `c`'s rank (refunding its previous writer); false, with an error
// answered, when that would take the rank past its quota.
bool Loop::charge(Conn& c, const std::string& key, std::size_t new_size) {
  auto it = data_.find(key);
  const std::size_t before =
      it != data_.end() && it->second.owner == c.rank ? cost(key, it->second.value.size()) : 0;
  const std::size_t used = usage_[c.rank] - before;
  if (used + cost(key, new_size) > options_.client_quota) {
    LOOM_LOG_WARN(Bootstrap,
                  "rendezvous server at {}: {} would hold more than its quota of {} bytes in the "
                  "store (key '{}'); refused",
                  addr_, c.who(), options_.client_quota, key.substr(0, 80));
    reply_error(c, fmt::format("rank {} would hold more than its store quota of {} bytes "
                               "(LOOM_STORE_QUOTA)",
                               c.rank, options_.client_quota));
    return false;
  }
  return true;
}

void Loop::refund(int owner, std::size_t bytes) {
  std::size_t& used = usage_[owner];
  used -= std::min(used, bytes);
}

void Loop::store(const std::string& key, Bytes value, int owner) {
  auto [it, fresh] = data_.try_emplace(key);
  Entry& e = it->second;
  if (!fresh) refund(e.owner, cost(key, e.value.size()));
  e.value = std::move(value);
  e.owner = owner;
  usage_[owner] += cost(key, e.value.size());
  note_gathered(key);
}

void Loop::handle_set(Conn& c, std::string key, std::span<const std::uint8_t> value) {
  if (!charge(c, key, value.size())) return;
  store(key, Bytes(value.begin(), value.end()), c.rank);
  respond(c, wire::Reply::Ok, 0, {});
  wake_waiters(key);
}

void Loop::handle_add(Conn& c, const std::string& key, std::int64_t delta) {
  auto it = data_.find(key);
  auto sum = counter_add(it == data_.end() ? nullptr : &it->second.value, delta, key);
  if (!sum.is_ok()) {
    reply_error(c, sum.status().message());
    return;
  }
  Bytes text = format_counter(sum.value());
  if (!charge(c, key, text.size())) return;
  store(key, std::move(text), c.rank);
  respond(c, wire::Reply::Ok, static_cast<std::uint64_t>(sum.value()), {});
  wake_waiters(key);
}

// A request that may wait and found nothing: answered Timeout at once when it asked not to wait
// (false), else its connection parks for wait_ms (kForeverMs and above: for good).
bool Loop::park_or_timeout(Conn& c, std::uint64_t wait_ms) {
  if (wait_ms == 0) {
    respond(c, wire::Reply::Timeout, 0, {});
    return false;
  }
  c.parked = true;
  c.parked_until = wait_ms >= kForeverMs
                       ? Clock::time_point::max()
                       : Clock::now() + milliseconds(static_cast<std::int64_t>(wait_ms));
  return true;
}

void Loop::handle_get(Conn& c, const wire::RequestHeader& h, std::string key) {
  if (auto it = data_.find(key); it != data_.end()) {
    respond(c, wire::Reply::Ok, it->second.value.size(), it->second.value);
    return;
  }
  const bool ends_on_gone = wire::get_ends_on_gone(h.arg);
  if (untold_gone(c, ends_on_gone)) {
    respond(c, wire::Reply::Timeout, 0, {});
    return;
  }
  if (!park_or_timeout(c, wire::get_wait_ms(h.arg))) return;
  c.ends_on_gone = ends_on_gone;
  waiters_[key].insert(c.id);
  c.parked_key = std::move(key);
}

void Loop::handle_erase(Conn& c, const std::string& prefix) {
  std::uint64_t n = 0;
  for (auto it = data_.lower_bound(prefix); it != data_.end() && it->first.starts_with(prefix);) {
    refund(it->second.owner, cost(it->first, it->second.value.size()));
    it = data_.erase(it);
    ++n;
  }
  if (n > 0) recount_gathers(prefix);
  respond(c, wire::Reply::Ok, n, {});
}

void Loop::handle_gone(Conn& c) {
  const std::size_t n = std::min(gone_.size(), wire::kMaxGoneBytes);
  respond(c, wire::Reply::Ok, n, std::span(reinterpret_cast<const std::uint8_t*>(gone_.data()), n));
}

void Loop::handle_watch(Conn& c, const wire::RequestHeader& h, const std::string& list) {
  std::vector<std::string> keys;
  for (std::size_t at = 0; at <= list.size();) {
    std::size_t end = list.find('\n', at);
    if (end == std::string::npos) end = list.size();
    keys.push_back(list.substr(at, end - at));
    at = end + 1;
  }
  for (std::size_t i = 0; i < keys.size(); ++i)
    if (data_.contains(keys[i])) {
      respond(c, wire::Reply::Ok, i, {});
      return;
    }
  if (!park_or_timeout(c, h.arg)) return;
  for (const std::string& k : keys) waiters_[k].insert(c.id);
  c.watch_keys = std::move(keys);
}

// The N-th client that vanished: listed for GONE, and set as a key that WATCHes wake on.
void Loop::note_gone(const Conn& c) {
  const std::string line = fmt::format("{} {} {}", c.rank, c.pid, c.host.empty() ? "?" : c.host);
  gone_ += line + "\n";
  const std::string key = fmt::format("{}{}", wire::kGoneKey, ++gone_count_);
  store(key, Bytes(line.begin(), line.end()), -1);
  wake_waiters(key);
  end_waits_on_gone();
}

void Loop::wake_waiters(const std::string& key) {
  auto node = waiters_.extract(key);
  if (node.empty()) return;
  const Bytes& value = data_[key].value;
  for (std::uint64_t id : node.mapped()) {
    auto it = conns_.find(id);
    if (it == conns_.end() || it->second->dead || !it->second->parked || it->second->parked_gather)
      continue;
    Conn& w = *it->second;
    if (!w.watch_keys.empty()) {
      const auto index = static_cast<std::uint64_t>(
          std::find(w.watch_keys.begin(), w.watch_keys.end(), key) - w.watch_keys.begin());
      unpark(w);
      respond(w, wire::Reply::Ok, index, {});
      runnable_.push_back(id);
      continue;
    }
    w.parked = false;
    w.parked_key.clear();
    respond(w, wire::Reply::Ok, value.size(), value);
    runnable_.push_back(id);
  }
}

void Loop::unpark(Conn& c) {
  if (!c.parked) return;
  if (c.parked_gather) {  // its id stays in the gather's waiters until they are woken or pruned
    c.parked = c.parked_gather = false;
    c.parked_key.clear();
    return;
  }
  if (!c.watch_keys.empty()) {
    for (const std::string& k : c.watch_keys) {
      auto it = waiters_.find(k);
      if (it == waiters_.end()) continue;
      it->second.erase(c.id);
      if (it->second.empty()) waiters_.erase(it);
    }
    c.watch_keys.clear();
    c.parked = false;
    return;
  }
  auto it = waiters_.find(c.parked_key);
  if (it != waiters_.end()) {
    it->second.erase(c.id);
    if (it->second.empty()) waiters_.erase(it);
  }
  c.parked = false;
  c.parked_key.clear();
}

}  // namespace loom::bootstrap::server
