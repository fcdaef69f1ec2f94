// POSIX shared-memory segments with RAII: a mapping that unmaps itself, and a name that unlinks
// itself, so no error path leaves memory mapped or a file in /dev/shm.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

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
  SegmentName name;
  Mapping mapping;
};

/// Creates a new segment `name` ("/loom-...") of `bytes` with O_CREAT|O_EXCL and mode 0600,
/// reserves its memory (so a full /dev/shm fails here rather than with SIGBUS later) and maps it.
Result<CreatedSegment> create_segment(const std::string& name, std::size_t bytes);

/// Opens and maps an existing segment, whose size must be within [min_bytes, max_bytes].
Result<Mapping> open_segment(const std::string& name, std::size_t min_bytes, std::size_t max_bytes);

/// Removes `name` from /dev/shm; a name already gone is not an error.
void unlink_segment(const std::string& name);

/// `nbytes` random bytes from getrandom(2), as lowercase hex.
Result<std::string> random_hex(std::size_t nbytes);

}  // namespace loom::transport::shm
