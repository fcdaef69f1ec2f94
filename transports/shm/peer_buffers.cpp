#include "transports/shm/peer_buffers.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <string>

#include "log/log.hpp"

namespace loom::transport::shm {
namespace {

std::atomic<std::uint64_t> g_mapped_bytes{0};

}  // namespace

std::uint64_t mapped_bytes_received() {
  return g_mapped_bytes.load(std::memory_order_relaxed);
}

void count_mapped_bytes(std::uint64_t n) {
  g_mapped_bytes.fetch_add(n, std::memory_order_relaxed);
}

PeerBuffers::~PeerBuffers() {
  for (const Mapped& m : maps_) ::munmap(m.base, m.size);
}

Result<const std::uint8_t*> PeerBuffers::map(pid_t pid, std::int64_t fd, std::uint64_t gen,
                                             std::uint64_t offset, std::uint64_t len) {
  const Mapped* hit = nullptr;
  for (auto it = maps_.begin(); it != maps_.end();) {
    if (it->fd == fd && it->gen == gen) {
      hit = &*it;
      break;
    }
    if (it->fd == fd) {  // the peer freed that buffer and its fd now names another
      ::munmap(it->base, it->size);
      it = maps_.erase(it);
    } else {
      ++it;
    }
  }
  if (hit == nullptr) {
    const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
    const int local = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (local < 0) return system_error(errno, "opening the peer's shared buffer " + path);
    struct stat st {};
    void* base = MAP_FAILED;
    if (::fstat(local, &st) == 0 && st.st_size > 0)
      base = ::mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ, MAP_SHARED, local, 0);
    const int err = errno;
    ::close(local);  // the mapping keeps the buffer
    if (base == MAP_FAILED) return system_error(err, "mapping the peer's shared buffer " + path);
    if (maps_.size() == kMaxMapped) {
      ::munmap(maps_.front().base, maps_.front().size);
      maps_.erase(maps_.begin());
    }
    maps_.push_back({fd, gen, base, static_cast<std::size_t>(st.st_size)});
    hit = &maps_.back();
    LOOM_LOG_DEBUG(Shm, "mapped pid {}'s shared buffer (fd {}, {} bytes) for single-copy reads",
                   pid, fd, hit->size);
  }
  if (offset > hit->size || len > hit->size - offset)
    return make_error(ErrorCode::Internal,
                      "a single-copy descriptor names bytes [{}, {}) of a {}-byte shared buffer",
                      offset, offset + len, hit->size);
  return static_cast<const std::uint8_t*>(hit->base) + offset;
}

}  // namespace loom::transport::shm
