#include "transports/shm/shm_segment.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <climits>
#include <csignal>
#include <cstdint>
#include <utility>

#include "common/process.hpp"
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

namespace {

// Sizes a new segment, allocates its pages now and maps it. Without the allocation, tmpfs hands
// out a sparse file and kills us with SIGBUS on first touch when /dev/shm (or the memory cgroup)
// is full: a small container /dev/shm, typically.
Result<Mapping> reserve_and_map(int fd, std::size_t bytes, const std::string& what) {
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0)
    return system_error(errno, "ftruncate of shared memory segment " + what);
  if (int e = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes)); e != 0)
    return system_error(e, fmt::format("reserving {} bytes of shared memory for segment {} (is "
                                       "/dev/shm or the memory limit too small? try smaller "
                                       "LOOM_SHM_SLOT_SIZE)",
                                       bytes, what));
  return map_fd(fd, bytes, what);
}

Result<Mapping> map_checked(int fd, std::size_t min_bytes, std::size_t max_bytes,
                            const std::string& what) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return system_error(errno, "fstat of " + what);
  auto size = static_cast<std::size_t>(st.st_size);
  if (!S_ISREG(st.st_mode) || st.st_size < 0 || size < min_bytes || size > max_bytes)
    return make_error(ErrorCode::Mismatch,
                      "shared memory segment {} has {} bytes, outside the valid [{}, {}]", what,
                      st.st_size, min_bytes, max_bytes);
  return map_fd(fd, size, what);
}

}  // namespace

Result<CreatedSegment> create_segment(const std::string& prefix, std::size_t bytes) {
  const std::string name = prefix + owner_tag();
  net::Fd fd(::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600));
  if (!fd.valid()) return system_error(errno, "shm_open(" + name + ", O_CREAT|O_EXCL)");
  CreatedSegment seg;
  seg.name = SegmentName(name);  // from here on, every return unlinks it
  LOOM_ASSIGN_OR_RETURN(seg.mapping, reserve_and_map(fd.get(), bytes, name));
  return seg;
}

Result<CreatedSegment> create_anonymous_segment(std::size_t bytes) {
  CreatedSegment seg;
  seg.fd = net::Fd(::memfd_create("loom-shm-channel", MFD_CLOEXEC));
  if (!seg.fd.valid()) return system_error(errno, "memfd_create");
  LOOM_ASSIGN_OR_RETURN(seg.mapping, reserve_and_map(seg.fd.get(), bytes, "(memfd)"));
  return seg;
}

bool anonymous_segments_available() {
  static const bool available = [] {
    net::Fd fd(::memfd_create("loom-probe", MFD_CLOEXEC));
    return fd.valid();
  }();
  return available;
}

Result<Mapping> open_segment(const std::string& name, std::size_t min_bytes,
                             std::size_t max_bytes) {
  net::Fd fd(::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0));
  if (!fd.valid()) return system_error(errno, "shm_open(" + name + ")");
  return map_checked(fd.get(), min_bytes, max_bytes, name);
}

Result<Mapping> map_segment_fd(int fd, std::size_t min_bytes, std::size_t max_bytes,
                               const std::string& what) {
  return map_checked(fd, min_bytes, max_bytes, what);
}

std::string owner_tag() {
  static const std::string tag = fmt::format("_o{}_{}_{}", proc::own_pid_namespace(), ::getpid(),
                                             proc::process_start_time(::getpid()));
  return tag;
}

std::optional<SegmentOwner> parse_owner(std::string_view name) {
  auto at = name.rfind("_o");
  if (at == std::string_view::npos) return std::nullopt;
  std::string_view rest = name.substr(at + 2);
  std::uint64_t v[3] = {0, 0, 0};
  for (int i = 0; i < 3; ++i) {
    auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), v[i]);
    if (ec != std::errc() || ptr == rest.data()) return std::nullopt;
    rest.remove_prefix(static_cast<std::size_t>(ptr - rest.data()));
    if (i < 2) {
      if (rest.empty() || rest.front() != '_') return std::nullopt;
      rest.remove_prefix(1);
    }
  }
  if (!rest.empty() || v[1] == 0 || v[1] > static_cast<std::uint64_t>(INT32_MAX))
    return std::nullopt;
  return SegmentOwner{v[0], static_cast<pid_t>(v[1]), v[2]};
}

bool owner_gone(const SegmentOwner& owner) {
  if (owner.pid_ns == 0 || owner.pid_ns != proc::own_pid_namespace() || owner.pid <= 0)
    return false;
  if (::kill(owner.pid, 0) != 0 && errno == ESRCH) return true;
  const auto st = proc::read_process_stat(owner.pid);
  if (!st || owner.start == 0 || st->start == 0) return false;  // cannot tell
  // Another process with its pid, or its own corpse: a zombie never maps anything again.
  return st->start != owner.start || st->state == 'Z' || st->state == 'X';
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
