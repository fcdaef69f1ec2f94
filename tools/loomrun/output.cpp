#include "output.hpp"

#include <poll.h>
#include <unistd.h>

#include <cerrno>

namespace loom::run {

void Sink::write(std::string_view text) {
  while (!broken_ && !text.empty()) {
    ssize_t n = ::write(fd_, text.data(), text.size());
    if (n >= 0) {
      text.remove_prefix(static_cast<std::size_t>(n));
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      pollfd p{fd_, POLLOUT, 0};  // someone made our output non-blocking: wait until it drains
      ::poll(&p, 1, -1);
    } else if (errno != EINTR) {
      broken_ = true;  // EPIPE and friends: nobody reads our output any more
    }
  }
}

void LineSplitter::emit(std::string_view text, bool add_newline) {
  scratch_ += prefix_;
  scratch_ += text;
  if (add_newline) scratch_ += '\n';
}

void LineSplitter::feed(std::string_view data) {
  scratch_.clear();
  while (!data.empty()) {
    std::size_t nl = data.find('\n');
    if (nl == std::string_view::npos) {
      pending_ += data;
      break;
    }
    if (pending_.empty()) {
      emit(data.substr(0, nl + 1), false);
    } else {
      pending_ += data.substr(0, nl + 1);
      emit(pending_, false);
      pending_.clear();
    }
    data.remove_prefix(nl + 1);
  }
  while (pending_.size() >= kMaxLine) {
    emit(std::string_view(pending_).substr(0, kMaxLine), terminate_partial_);
    pending_.erase(0, kMaxLine);
  }
  if (!scratch_.empty()) sink_->write(scratch_);
}

void LineSplitter::finish() {
  if (pending_.empty()) return;
  scratch_.clear();
  emit(pending_, terminate_partial_);
  pending_.clear();
  sink_->write(scratch_);
}

void report(std::string_view message) {
  static Sink err(STDERR_FILENO);
  std::string line = "loomrun: ";
  line += message;
  line += '\n';
  err.write(line);
}

}  // namespace loom::run
