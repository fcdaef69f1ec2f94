// Small POSIX helpers shared by loomrun's modules: an owning file descriptor and the error type
// used for setup failures.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

namespace loom::run {

/// Owns one file descriptor and closes it on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(std::exchange(other.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  [[nodiscard]] int get() const noexcept { return fd_; }
  [[nodiscard]] bool valid() const noexcept { return fd_ >= 0; }
  void reset(int fd = -1) noexcept;

 private:
  int fd_ = -1;
};

/// A failure while setting up or running the job (not a rank's failure): loomrun reports it and
/// exits 1.
class RunError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// `what: strerror(err)`.
std::string os_error_text(const std::string& what, int err);

/// Throws RunError with os_error_text(what, errno).
[[noreturn]] void throw_os_error(const std::string& what);

}  // namespace loom::run
