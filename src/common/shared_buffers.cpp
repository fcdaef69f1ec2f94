#include "common/shared_buffers.hpp"

#include <sys/mman.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <map>
#include <mutex>
#include <shared_mutex>

namespace loom::shared_buffers {
namespace {

struct Entry {
  int fd;
  std::uint64_t gen;
  std::size_t size;
  int holds = 0;          // operations in flight that use the buffer (hold())
  bool released = false;  // freed while held: unmapped when the last hold goes
};

// By base address. Lookups (one per large shared-memory send) take the shared lock.
struct Registry {
  std::shared_mutex mu;
  std::map<std::uintptr_t, Entry> buffers;
  std::atomic<std::uint64_t> next_gen{1};
  std::atomic<std::size_t> count{0};  // buffers.size(), read without the lock
};

void unmap(void* p, const Entry& e) noexcept {
  ::munmap(p, e.size);
  ::close(e.fd);
}

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: buffers may be freed at exit
  return *r;
}

}  // namespace

Result<void*> allocate(std::size_t bytes) {
  if (bytes == 0) return make_error(ErrorCode::InvalidArgument, "host_alloc of 0 bytes");
  // The pages are backed when first touched: a size the host can never back fails here, not
  // at a later write (a size within its memory may still fail there if others take it first).
  struct sysinfo si {};
  if (::sysinfo(&si) == 0) {
    const std::uint64_t unit = si.mem_unit == 0 ? 1 : si.mem_unit;
    const std::uint64_t ram = std::uint64_t{si.totalram} * unit;
    const std::uint64_t swap = std::uint64_t{si.totalswap} * unit;
    if (bytes > ram + swap)
      return make_error(ErrorCode::SystemError,
                        "host_alloc of {} bytes: more than this host's memory ({} bytes of RAM and "
                        "{} of swap)",
                        bytes, ram, swap);
  }
  const int fd = ::memfd_create("loom-buffer", MFD_CLOEXEC);
  if (fd < 0) return system_error(errno, "host_alloc: memfd_create");
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    Status st = system_error(errno, "host_alloc: ftruncate to " + std::to_string(bytes) + " bytes");
    ::close(fd);
    return st;
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    Status st = system_error(errno, "host_alloc: mmap of " + std::to_string(bytes) + " bytes");
    ::close(fd);
    return st;
  }
  Registry& r = registry();
  std::unique_lock lk(r.mu);
  r.buffers[reinterpret_cast<std::uintptr_t>(p)] = {fd, r.next_gen++, bytes};
  r.count.store(r.buffers.size(), std::memory_order_relaxed);
  return p;
}

Released release(void* p) noexcept {
  Registry& r = registry();
  Entry e{};
  {
    std::unique_lock lk(r.mu);
    auto it = r.buffers.find(reinterpret_cast<std::uintptr_t>(p));
    if (it == r.buffers.end() || it->second.released) return Released::Unknown;
    if (it->second.holds > 0) {
      it->second.released = true;
      return Released::Deferred;
    }
    e = it->second;
    r.buffers.erase(it);
    r.count.store(r.buffers.size(), std::memory_order_relaxed);
  }
  unmap(p, e);
  return Released::Now;
}

std::shared_ptr<void> hold(const void* p, std::size_t len) {
  Registry& r = registry();
  if (p == nullptr || r.count.load(std::memory_order_relaxed) == 0) return nullptr;
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  std::unique_lock lk(r.mu);
  auto it = r.buffers.upper_bound(at);
  if (it == r.buffers.begin()) return nullptr;
  --it;
  if (at - it->first >= std::max<std::size_t>(it->second.size, 1) || it->second.released ||
      len > it->second.size - (at - it->first))
    return nullptr;
  ++it->second.holds;
  auto* base = reinterpret_cast<void*>(it->first);
  return std::shared_ptr<void>(base, [](void* b) {
    Registry& reg = registry();
    Entry e{};
    {
      std::unique_lock l(reg.mu);
      auto held = reg.buffers.find(reinterpret_cast<std::uintptr_t>(b));
      if (held == reg.buffers.end() || --held->second.holds > 0 || !held->second.released) return;
      e = held->second;
      reg.buffers.erase(held);
      reg.count.store(reg.buffers.size(), std::memory_order_relaxed);
    }
    unmap(b, e);
  });
}

std::optional<Location> find(const void* p, std::size_t len) {
  Registry& r = registry();
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  std::shared_lock lk(r.mu);
  if (r.buffers.empty()) return std::nullopt;
  auto it = r.buffers.upper_bound(at);
  if (it == r.buffers.begin()) return std::nullopt;
  --it;
  const std::uintptr_t offset = at - it->first;
  if (offset > it->second.size || len > it->second.size - offset) return std::nullopt;
  return Location{it->second.fd, it->second.gen, offset, it->second.size};
}

}  // namespace loom::shared_buffers
