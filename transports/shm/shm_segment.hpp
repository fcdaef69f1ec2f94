// Shared-memory segments with RAII: a mapping that unmaps itself, and a name that unlinks
// itself, so no error path leaves memory mapped or a file in /dev/shm. A segment is anonymous
// (memfd_create: no name anywhere, freed with its last descriptor or mapping, whoever dies) or,
// where that is impossible, named in /dev/shm with its creator's identity in the name (pid
// namespace, pid, start time), so that any later process can prove the creator gone and remove
// it, whatever the segment holds (remove_orphaned_channels).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/socket.hpp"
#include "common/status.hpp"

namespace loom::transport::shm {

/// An mmap(MAP_SHARED) region, unmapped on destruction.
class Mapping {
 public:
  Mapping() = default;
  Mapping(void* base, std::size_t size) : base_(base), size_(size) {}
  Mapping(Mapping&& o) noexcept : base_(o.base_), size_(o.size_) {
    o.base_ = nullptr;
    o.size_ = 0;
  }
  Mapping& operator=(Mapping&& o) noexcept;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() { reset(); }

  [[nodiscard]] std::uint8_t* data() const { return static_cast<std::uint8_t*>(base_); }
  [[nodiscard]] std::size_t size() const { return size_; }
  [[nodiscard]] bool valid() const { return base_ != nullptr; }
  void reset();

 private:
  void* base_ = nullptr;
  std::size_t size_ = 0;
};

/// The name of a segment this process created; shm_unlink()ed on destruction unless unlinked
/// earlier.
class SegmentName {
 public:
  SegmentName() = default;
  explicit SegmentName(std::string name) : name_(std::move(name)) {}
  SegmentName(SegmentName&& o) noexcept : name_(std::move(o.name_)) { o.name_.clear(); }
  SegmentName& operator=(SegmentName&& o) noexcept;
  SegmentName(const SegmentName&) = delete;
  SegmentName& operator=(const SegmentName&) = delete;
  ~SegmentName() { unlink(); }

  [[nodiscard]] const std::string& str() const { return name_; }
  /// Removes the name from /dev/shm now (idempotent; mappings stay valid).
  void unlink();

 private:
  std::string name_;
};

struct CreatedSegment {
  SegmentName name;  // empty for an anonymous segment
  Mapping mapping;
  net::Fd fd;  // an anonymous segment's descriptor, until it is handed to the peer
};

/// Creates a new segment named `prefix` ("/loom-...") followed by owner_tag(), of `bytes`, with
/// O_CREAT|O_EXCL and mode 0600, reserves its memory (so a full /dev/shm fails here rather than
/// with SIGBUS later) and maps it. The full name is the result's name.str().
Result<CreatedSegment> create_segment(const std::string& prefix, std::size_t bytes);
/// Creates an anonymous segment of `bytes` (memfd_create), reserved and mapped like a named one.
Result<CreatedSegment> create_anonymous_segment(std::size_t bytes);
/// Whether this process may create anonymous segments (memfd_create is refused by old kernels
/// and some seccomp profiles). Asked once.
bool anonymous_segments_available();

/// Opens and maps an existing segment, whose size must be within [min_bytes, max_bytes].
Result<Mapping> open_segment(const std::string& name, std::size_t min_bytes, std::size_t max_bytes);
/// Maps the segment behind descriptor `fd` (received from its creator), likewise checked.
Result<Mapping> map_segment_fd(int fd, std::size_t min_bytes, std::size_t max_bytes,
                               const std::string& what);

/// The creator of a named segment, as its name records it.
struct SegmentOwner {
  std::uint64_t pid_ns = 0;  // inode of its pid namespace
  pid_t pid = 0;
  std::uint64_t start = 0;  // its start time (clock ticks after boot; 0: unknown)
};
/// "_o<pid namespace>_<pid>_<start time>": appended to every named segment this process creates.
std::string owner_tag();
/// The owner recorded at the end of a segment name, if it has one.
std::optional<SegmentOwner> parse_owner(std::string_view name);
/// True only when the owner provably no longer exists: it is in our pid namespace and no process
/// has its pid, or the process with its pid started at another time (the pid was reused), or it
/// is that process's unreaped corpse (a zombie).
bool owner_gone(const SegmentOwner& owner);

/// Removes `name` from /dev/shm; a name already gone is not an error.
void unlink_segment(const std::string& name);

/// `nbytes` random bytes from getrandom(2), as lowercase hex.
Result<std::string> random_hex(std::size_t nbytes);

}  // namespace loom::transport::shm
