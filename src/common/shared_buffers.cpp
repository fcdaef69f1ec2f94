#include "common/shared_buffers.hpp"

#include <sys/mman.h>
#include <unistd.h>

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
};

// By base address. Lookups (one per large shared-memory send) take the shared lock.
struct Registry {
  std::shared_mutex mu;
  std::map<std::uintptr_t, Entry> buffers;
  std::atomic<std::uint64_t> next_gen{1};
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: buffers may be freed at exit
  return *r;
}

}  // namespace

Result<void*> allocate(std::size_t bytes) {
  if (bytes == 0) return make_error(ErrorCode::InvalidArgument, "host_alloc of 0 bytes");
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
  return p;
}

bool release(void* p) noexcept {
  Registry& r = registry();
  Entry e{};
  {
    std::unique_lock lk(r.mu);
    auto it = r.buffers.find(reinterpret_cast<std::uintptr_t>(p));
    if (it == r.buffers.end()) return false;
    e = it->second;
    r.buffers.erase(it);
  }
  ::munmap(p, e.size);
  ::close(e.fd);
  return true;
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
