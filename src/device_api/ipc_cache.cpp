#include "device_api/ipc_cache.hpp"

#include <algorithm>

namespace loom::device {

Result<BufferRef> ExportCache::share(const void* p, std::size_t bytes) {
  LOOM_ASSIGN_OR_RETURN(Allocation a, dev_.allocation(p));
  if (a.id == 0)
    return make_error(ErrorCode::InvalidUsage,
                      "device buffer {} cannot be shared: the runtime gives its allocation no id",
                      p);
  const auto base = reinterpret_cast<std::uintptr_t>(a.base);
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  if (at + bytes > base + a.bytes)
    return make_error(ErrorCode::InvalidArgument,
                      "device buffer {} of {} bytes runs past the end of its allocation ({} "
                      "bytes at {})",
                      p, bytes, a.bytes, a.base);
  BufferRef ref;
  ref.alloc_id = a.id;
  ref.base = base;
  ref.alloc_bytes = a.bytes;
  ref.offset = at - base;
  ref.bytes = bytes;
  auto it = entries_.find({base, a.id});
  if (it != entries_.end()) {
    ++hits_;
    it->second.used = ++stamp_;
    ref.handle = it->second.handle;
    return ref;
  }
  ++misses_;
  auto h = dev_.ipc_handle(a.base);
  if (!h.is_ok())
    return make_error(ErrorCode::InvalidUsage, "device buffer {} cannot be shared: {}", p,
                      h.status().message());
  if (entries_.size() >= limit_) {  // handles hold nothing: forget the least recently used
    auto oldest = std::min_element(
        entries_.begin(), entries_.end(),
        [](const auto& x, const auto& y) { return x.second.used < y.second.used; });
    entries_.erase(oldest);
  }
  entries_[{base, a.id}] = Entry{*h, ++stamp_};
  ref.handle = *h;
  return ref;
}

ImportCache::~ImportCache() {
  for (auto& [key, e] : entries_) close_(e.mapped);
}

Result<void*> ImportCache::map(int peer, const BufferRef& ref, std::uint64_t ticket) {
  if (ref.offset > ref.alloc_bytes || ref.bytes > ref.alloc_bytes - ref.offset)
    return make_error(ErrorCode::Internal,
                      "rank {}'s buffer of {} bytes at offset {} lies outside its allocation of "
                      "{} bytes",
                      peer, ref.bytes, ref.offset, ref.alloc_bytes);
  auto it = entries_.find({peer, ref.alloc_id});
  if (it == entries_.end()) {
    // A mapping of another allocation the peer had at this base is stale: it freed that one.
    for (auto& [key, e] : entries_)
      if (key.first == peer && e.base == ref.base) e.stale = true;
    LOOM_ASSIGN_OR_RETURN(void* mapped, open_(ref.handle));
    ++opens_;
    it = entries_.emplace(Key{peer, ref.alloc_id}, Entry{mapped, ref.base, ref.alloc_bytes}).first;
  }
  it->second.last_ticket = std::max(it->second.last_ticket, ticket);
  it->second.used = ++stamp_;
  void* at = static_cast<std::uint8_t*>(it->second.mapped) + ref.offset;
  evict();
  return at;
}

void ImportCache::retire(std::uint64_t ticket) {
  retired_ = std::max(retired_, ticket);
  evict();
}

void ImportCache::close(std::map<Key, Entry>::iterator it) {
  close_(it->second.mapped);
  ++closes_;
  entries_.erase(it);
}

void ImportCache::evict() {
  for (auto it = entries_.begin(); it != entries_.end();) {
    auto next = std::next(it);
    if (it->second.stale && it->second.last_ticket <= retired_) close(it);
    it = next;
  }
  while (entries_.size() > limit_) {
    auto victim = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it)
      if (it->second.last_ticket <= retired_ &&
          (victim == entries_.end() || it->second.used < victim->second.used))
        victim = it;
    if (victim == entries_.end()) return;  // every mapping is in use by a queued call
    close(victim);
  }
}

}  // namespace loom::device
