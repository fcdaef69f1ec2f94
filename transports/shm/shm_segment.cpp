#include "transports/shm/shm_segment.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "common/socket.hpp"

namespace loom::transport::shm {

Mapping& Mapping::operator=(Mapping&& o) noexcept {
  if (this != &o) {
    reset();
    base_ = std::exchange(o.base_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

void Mapping::reset() {
  if (base_ != nullptr) ::munmap(base_, size_);
  base_ = nullptr;
  size_ = 0;
}

SegmentName& SegmentName::operator=(SegmentName&& o) noexcept {
  if (this != &o) {
    unlink();
    name_ = std::move(o.name_);
    o.name_.clear();
  }
  return *this;
}

void SegmentName::unlink() {
  if (name_.empty()) return;
  unlink_segment(name_);
  name_.clear();
}

void unlink_segment(const std::string& name) {
  (void)::shm_unlink(name.c_str());  // ENOENT: the peer unlinked it already
}

namespace {

Result<Mapping> map_fd(int fd, std::size_t bytes, const std::string& name) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return system_error(errno, "mmap of shared memory segment " + name);
  return Mapping(p, bytes);
}

}  // namespace

Result<CreatedSegment> create_segment(const std::string& name, std::size_t bytes) {
  net::Fd fd(::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600));
  if (!fd.valid()) return system_error(errno, "shm_open(" + name + ", O_CREAT|O_EXCL)");
  CreatedSegment seg;
  seg.name = SegmentName(name);  // from here on, every return unlinks it
  if (::ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0)
    return system_error(errno, "ftruncate of shared memory segment " + name);
  // Allocates the pages now: tmpfs would otherwise hand out a sparse file and kill us with SIGBUS
  // on first touch when /dev/shm is full (a small container /dev/shm, typically).
  if (int e = ::posix_fallocate(fd.get(), 0, static_cast<off_t>(bytes)); e != 0)
    return system_error(e, fmt::format("reserving {} bytes of /dev/shm for segment {} (is "
                                       "/dev/shm too small? try smaller LOOM_SHM_SLOT_SIZE)",
                                       bytes, name));
  LOOM_ASSIGN_OR_RETURN(seg.mapping, map_fd(fd.get(), bytes, name));
  return seg;
}

Result<Mapping> open_segment(const std::string& name, std::size_t min_bytes,
                             std::size_t max_bytes) {
  net::Fd fd(::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0));
  if (!fd.valid()) return system_error(errno, "shm_open(" + name + ")");
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return system_error(errno, "fstat of " + name);
  auto size = static_cast<std::size_t>(st.st_size);
  if (st.st_size < 0 || size < min_bytes || size > max_bytes)
    return make_error(ErrorCode::Mismatch,
                      "shared memory segment {} has {} bytes, outside the valid [{}, {}]", name,
                      st.st_size, min_bytes, max_bytes);
  return map_fd(fd.get(), size, name);
}

Result<std::string> random_hex(std::size_t nbytes) {
  std::string raw(nbytes, '\0');
  std::size_t got = 0;
  while (got < nbytes) {
    ssize_t n = ::getrandom(raw.data() + got, nbytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return system_error(errno, "getrandom");
    }
    got += static_cast<std::size_t>(n);
  }
  std::string hex;
  hex.reserve(2 * nbytes);
  for (char c : raw) hex += fmt::format("{:02x}", static_cast<unsigned char>(c));
  return hex;
}

}  // namespace loom::transport::shm
