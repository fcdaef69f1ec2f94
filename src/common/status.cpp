#include "common/status.hpp"

#include <cstring>

namespace loom {

Status system_error(int errno_value, const std::string& what) {
  return {ErrorCode::SystemError, fmt::format("{}: {}", what, std::strerror(errno_value))};
}

void throw_if_error(const Status& s) {
  if (!s.is_ok()) throw Error(s.code(), s.message());
}

std::string_view to_string(ErrorCode code) noexcept {
  switch (code) {
    case ErrorCode::Ok: return "Ok";
    case ErrorCode::InvalidArgument: return "InvalidArgument";
    case ErrorCode::InvalidUsage: return "InvalidUsage";
    case ErrorCode::Mismatch: return "Mismatch";
    case ErrorCode::Timeout: return "Timeout";
    case ErrorCode::PeerFailed: return "PeerFailed";
    case ErrorCode::SystemError: return "SystemError";
    case ErrorCode::Aborted: return "Aborted";
    case ErrorCode::Internal: return "Internal";
  }
  return "Unknown";
}

}  // namespace loom
