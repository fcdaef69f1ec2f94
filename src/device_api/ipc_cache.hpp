// The peer-read route's caches of CUDA IPC handles (src/device/peer_read.hpp), both keyed by
// allocation, not by address: a buffer freed and reallocated at the same address is another
// allocation (a new allocation id), so nothing stale is ever handed out.
//   * ExportCache: this rank's buffers -> the handle of the allocation holding each (a driver
//     call saved per call and buffer).
//   * ImportCache: the peers' allocations -> where they are mapped here (cudaIpcOpenMemHandle,
//     which costs far more than a call: opened once per allocation, closed when evicted).
//     Bounded: over its limit it closes the least recently used mappings that no call still on
//     the device uses; a peer's allocation seen with a new id at the same base is stale and is
//     closed as soon as no queued call uses it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "device_api/device.hpp"
#include "device_api/peer_card.hpp"

namespace loom::device {

class ExportCache {
 public:
  ExportCache(Device& dev, std::size_t limit) : dev_(dev), limit_(limit) {}

  /// The reference to the `bytes` at `p` (device memory): InvalidUsage when the runtime cannot
  /// share it (no allocation id, or cudaIpcGetMemHandle refuses the allocation: memory of a
  /// stream-ordered pool, for instance).
  Result<BufferRef> share(const void* p, std::size_t bytes);
  [[nodiscard]] std::uint64_t hits() const { return hits_; }
  [[nodiscard]] std::uint64_t misses() const { return misses_; }

 private:
  struct Entry {
    IpcHandle handle;
    std::uint64_t used = 0;  // stamp of the last lookup
  };
  Device& dev_;
  std::size_t limit_;
  std::map<std::pair<std::uintptr_t, std::uint64_t>, Entry> entries_;  // (base, id)
  std::uint64_t stamp_ = 0;
  std::uint64_t hits_ = 0;
  std::uint64_t misses_ = 0;
};

class ImportCache {
 public:
  using Open = std::function<Result<void*>(const IpcHandle&)>;
  using Close = std::function<void(void*)>;
  /// `limit`: mappings kept open (more only while queued calls use them all).
  ImportCache(Open open, Close close, std::size_t limit)
      : open_(std::move(open)), close_(std::move(close)), limit_(limit) {}
  ~ImportCache();  // closes every mapping (the caller made sure no call uses them)
  ImportCache(const ImportCache&) = delete;
  ImportCache& operator=(const ImportCache&) = delete;

  /// Where `peer`'s buffer `ref` is here (its allocation mapped, plus the offset), for call
  /// `ticket`, which uses the mapping until retire(ticket).
  Result<void*> map(int peer, const BufferRef& ref, std::uint64_t ticket);
  /// Every call up to `ticket` has finished on the device: the mappings only they used may close.
  void retire(std::uint64_t ticket);
  [[nodiscard]] std::size_t open_mappings() const { return entries_.size(); }
  [[nodiscard]] std::uint64_t opens() const { return opens_; }
  [[nodiscard]] std::uint64_t closes() const { return closes_; }

 private:
  struct Entry {
    void* mapped = nullptr;
    std::uint64_t base = 0;  // the peer's address of the allocation
    std::uint64_t bytes = 0;
    std::uint64_t last_ticket = 0;  // the last call that uses it
    std::uint64_t used = 0;         // stamp of the last lookup (LRU)
    bool stale = false;             // the peer has another allocation at `base` now
  };
  using Key = std::pair<int, std::uint64_t>;  // (peer, allocation id)
  /// Closes stale entries and, over the limit, the least recently used, of those retired.
  void evict();
  void close(std::map<Key, Entry>::iterator it);

  Open open_;
  Close close_;
  std::size_t limit_;
  std::map<Key, Entry> entries_;
  std::uint64_t retired_ = 0;
  std::uint64_t stamp_ = 0;
  std::uint64_t opens_ = 0;
  std::uint64_t closes_ = 0;
};

}  // namespace loom::device
