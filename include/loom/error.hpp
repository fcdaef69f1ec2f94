// The one error type of the public API.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace loom {

enum class ErrorCode {
  Ok = 0,
  InvalidArgument,  // bad pointer, dtype, op, root, count
  InvalidUsage,     // call on a destroyed, failed or aborted communicator; bad environment
  Mismatch,         // ranks called different collectives / counts / dtypes for one sequence number
  Timeout,          // a deadline passed
  PeerFailed,       // a peer closed, reset or died
  SystemError,      // an OS call failed (socket, mmap, ...)
  Aborted,          // the communicator was aborted
  Internal,         // a loom bug: please report
};

std::string_view to_string(ErrorCode code) noexcept;

/// Thrown by every public call that fails. The message names the rank, the peer (where one is
/// involved) and the operation.
class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  [[nodiscard]] ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace loom
