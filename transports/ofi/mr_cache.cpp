#include "transports/ofi/mr_cache.hpp"

#include <unistd.h>

#include "transports/ofi/ofi_fabric.hpp"

namespace loom::transport::ofi {

MrCache::~MrCache() {
  for (Entry& e : entries_) fi_close(&e.mr->fid);
}

Result<void*> MrCache::desc(const void* base, std::size_t len, MemoryKind kind) {
  if (!enabled_ || len == 0) return nullptr;
  auto begin = reinterpret_cast<std::uintptr_t>(base);
  auto end = begin + len;
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->iface == kind.iface && it->begin <= begin && end <= it->end) {
      entries_.splice(entries_.begin(), entries_, it);
      ++hits_;
      return fi_mr_desc(entries_.front().mr);
    }
  }
  // Register whole pages so neighbouring chunks of one buffer share a registration.
  static const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  std::uintptr_t rb = kind.iface == FI_HMEM_SYSTEM ? begin & ~(page - 1) : begin;
  std::uintptr_t re = kind.iface == FI_HMEM_SYSTEM ? (end + page - 1) & ~(page - 1) : end;
  LOOM_ASSIGN_OR_RETURN(fid_mr * mr, register_range(rb, re, kind));
  if (entries_.size() >= capacity_) {
    fi_close(&entries_.back().mr->fid);
    entries_.pop_back();
  }
  entries_.push_front(Entry{rb, re, kind.iface, mr});
  return fi_mr_desc(mr);
}

Result<fid_mr*> MrCache::register_range(std::uintptr_t begin, std::uintptr_t end, MemoryKind kind) {
  // NOLINTNEXTLINE(performance-no-int-to-ptr): the page-aligned range around a user buffer
  iovec iov{reinterpret_cast<void*>(begin), end - begin};
  fi_mr_attr attr{};
  attr.mr_iov = &iov;
  attr.iov_count = 1;
  attr.access = FI_SEND | FI_RECV;
  attr.iface = kind.iface;
  attr.requested_key = next_key_++;  // unique per domain unless the provider picks (PROV_KEY)
  if (kind.iface == FI_HMEM_CUDA) attr.device.cuda = static_cast<int>(kind.device);
  fid_mr* mr = nullptr;
  int rc = fi_mr_regattr(domain_, &attr, 0, &mr);
  if (rc != 0)
    return make_error(ErrorCode::SystemError, "registering {} bytes at {:#x}: {}", end - begin,
                      begin, fi_error("fi_mr_regattr", rc));
  ++registrations_;
  return mr;
}

}  // namespace loom::transport::ofi
