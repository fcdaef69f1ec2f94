#include "transports/ofi/mr_cache.hpp"

#include <unistd.h>

#include "transports/ofi/ofi_fabric.hpp"

namespace loom::transport::ofi {

MrCache::~MrCache() {
  for (Entry& e : entries_) fi_close(&e.mr->fid);
}

const MrCache::Entry* MrCache::lookup(std::uintptr_t begin, std::uintptr_t end, fi_hmem_iface iface,
                                      std::uint64_t alloc_id) {
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->iface == iface && it->alloc_id == alloc_id && it->begin <= begin && end <= it->end) {
      entries_.splice(entries_.begin(), entries_, it);
      ++hits_;
      return &entries_.front();
    }
  }
  return nullptr;
}

void MrCache::insert(Entry e) {
  if (entries_.size() >= capacity_) {
    fi_close(&entries_.back().mr->fid);
    entries_.pop_back();
  }
  entries_.push_front(e);
}

Result<void*> MrCache::desc(const void* base, std::size_t len, HmemDevice kind) {
  if (!enabled_ || len == 0) return nullptr;
  auto begin = reinterpret_cast<std::uintptr_t>(base);
  auto end = begin + len;
  if (const Entry* e = lookup(begin, end, kind.iface, 0)) return fi_mr_desc(e->mr);
  // Register whole pages so neighbouring chunks of one buffer share a registration.
  static const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  std::uintptr_t rb = kind.iface == FI_HMEM_SYSTEM ? begin & ~(page - 1) : begin;
  std::uintptr_t re = kind.iface == FI_HMEM_SYSTEM ? (end + page - 1) & ~(page - 1) : end;
  LOOM_ASSIGN_OR_RETURN(fid_mr * mr, register_range(rb, re, kind));
  insert(Entry{rb, re, kind.iface, 0, mr});
  return fi_mr_desc(mr);
}

Result<void*> MrCache::device_desc(const void* base, std::size_t len, HmemDevice kind,
                                   std::uint64_t alloc_id) {
  if (len == 0) return nullptr;
  auto begin = reinterpret_cast<std::uintptr_t>(base);
  auto end = begin + len;
  if (const Entry* e = lookup(begin, end, kind.iface, alloc_id)) return fi_mr_desc(e->mr);
  // A device entry over these addresses with another id belongs to freed memory: release it.
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->alloc_id != 0 && it->alloc_id != alloc_id && it->begin < end && begin < it->end) {
      fi_close(&it->mr->fid);
      it = entries_.erase(it);
      ++stale_;
    } else {
      ++it;
    }
  }
  LOOM_ASSIGN_OR_RETURN(fid_mr * mr, register_range(begin, end, kind));
  insert(Entry{begin, end, kind.iface, alloc_id, mr});
  return fi_mr_desc(mr);
}

Status MrCache::probe(const void* base, std::size_t len, HmemDevice kind) {
  auto begin = reinterpret_cast<std::uintptr_t>(base);
  LOOM_ASSIGN_OR_RETURN(fid_mr * mr, register_range(begin, begin + len, kind));
  fi_close(&mr->fid);
  return Status::ok();
}

Result<fid_mr*> MrCache::register_range(std::uintptr_t begin, std::uintptr_t end, HmemDevice kind) {
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
