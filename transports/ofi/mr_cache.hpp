// Memory registrations for providers whose mr_mode needs them (FI_MR_LOCAL; FI_MR_HMEM for
// device memory). Registrations are cached by address range and reused for any buffer inside a
// cached range; the least recently used one is released when the cache is full.
// Host memory is registered by whole pages around each buffer. Caveat (as in every user-level
// registration cache): a host buffer freed and reallocated at the same address keeps its old
// registration; providers with their own memory monitors (efa) cope.
// Device memory (FI_HMEM) is registered a whole allocation at a time and keyed by its
// allocation id as well, so a reallocation at the same address is registered anew and the stale
// registration released: a NIC must never write through a registration of freed GPU memory.
#pragma once

#include <rdma/fi_domain.h>

#include <cstdint>
#include <list>
#include <string>

#include "common/status.hpp"

namespace loom::transport::ofi {

/// The FI_HMEM interface and device of a registration: host memory, or a device the provider
/// reaches through FI_HMEM.
struct HmemDevice {
  fi_hmem_iface iface = FI_HMEM_SYSTEM;
  std::uint64_t device = 0;  // CUDA device ordinal etc.
};

class MrCache {
 public:
  MrCache(fid_domain* domain, bool enabled, std::size_t capacity = 64)
      : domain_(domain), enabled_(enabled), capacity_(capacity) {}
  ~MrCache();
  MrCache(const MrCache&) = delete;
  MrCache& operator=(const MrCache&) = delete;

  [[nodiscard]] bool enabled() const { return enabled_; }
  /// The descriptor to pass with a buffer (null when registration is off or len is 0).
  Result<void*> desc(const void* base, std::size_t len, HmemDevice kind = {});
  /// The descriptor of device memory [base, base + len), a whole allocation whose id is
  /// `alloc_id` (never 0). Registered whatever `enabled` says (FI_MR_HMEM).
  Result<void*> device_desc(const void* base, std::size_t len, HmemDevice kind,
                            std::uint64_t alloc_id);
  /// Registers [base, base + len) once and releases it: whether the provider accepts it.
  Status probe(const void* base, std::size_t len, HmemDevice kind);
  [[nodiscard]] std::size_t size() const { return entries_.size(); }
  [[nodiscard]] std::uint64_t registrations() const { return registrations_; }
  [[nodiscard]] std::uint64_t hits() const { return hits_; }
  /// Device registrations released because their memory was reallocated.
  [[nodiscard]] std::uint64_t stale() const { return stale_; }

 private:
  struct Entry {
    std::uintptr_t begin = 0;
    std::uintptr_t end = 0;
    fi_hmem_iface iface = FI_HMEM_SYSTEM;
    std::uint64_t alloc_id = 0;  // device allocations only
    fid_mr* mr = nullptr;
  };
  Result<fid_mr*> register_range(std::uintptr_t begin, std::uintptr_t end, HmemDevice kind);
  /// The cached entry for [begin, end) of `kind` and `alloc_id`, moved to the front; or null.
  const Entry* lookup(std::uintptr_t begin, std::uintptr_t end, fi_hmem_iface iface,
                      std::uint64_t alloc_id);
  void insert(Entry e);

  fid_domain* domain_;
  bool enabled_;
  std::size_t capacity_;
  std::list<Entry> entries_;  // most recently used first
  std::uint64_t registrations_ = 0;
  std::uint64_t hits_ = 0;
  std::uint64_t stale_ = 0;
  std::uint64_t next_key_ = 1;
};

}  // namespace loom::transport::ofi
