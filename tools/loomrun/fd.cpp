#include "fd.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace loom::run {

void UniqueFd::reset(int fd) noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

std::string os_error_text(const std::string& what, int err) {
  return what + ": " + std::strerror(err);
}

void throw_os_error(const std::string& what) {
  throw RunError(os_error_text(what, errno));
}

}  // namespace loom::run
