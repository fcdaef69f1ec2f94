// Internal error model: Status and Result<T>. Public API code converts a failed Status into a
// thrown loom::Error at the boundary (see throw_if_error).
#pragma once

#include <fmt/format.h>

#include <string>
#include <utility>
#include <variant>

#include "loom/error.hpp"

namespace loom {

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status ok() { return {}; }

  [[nodiscard]] bool is_ok() const noexcept { return code_ == ErrorCode::Ok; }
  explicit operator bool() const noexcept { return is_ok(); }
  [[nodiscard]] ErrorCode code() const noexcept { return code_; }
  [[nodiscard]] const std::string& message() const noexcept { return message_; }

  /// Returns a copy whose message is prefixed with `context: `.
  [[nodiscard]] Status with_context(const std::string& context) const {
    if (is_ok()) return *this;
    Status s{code_, context + ": " + message_};
    s.peer_ = peer_;
    return s;
  }

  /// The rank of the peer at fault, when known (PeerFailed, Mismatch); -1 otherwise.
  [[nodiscard]] int peer() const noexcept { return peer_; }
  /// Returns a copy naming `peer` as the rank at fault, unless one is named already.
  [[nodiscard]] Status with_peer(int peer) const {
    Status s = *this;
    if (!s.is_ok() && s.peer_ < 0) s.peer_ = peer;
    return s;
  }

 private:
  ErrorCode code_ = ErrorCode::Ok;
  std::string message_;
  int peer_ = -1;
};

template <typename... Args>
Status make_error(ErrorCode code, fmt::format_string<Args...> f, Args&&... args) {
  return {code, fmt::format(f, std::forward<Args>(args)...)};
}

/// Status for a failed OS call, with strerror(errno_value) appended.
Status system_error(int errno_value, const std::string& what);

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {}  // NOLINT(google-explicit-constructor)

  [[nodiscard]] bool is_ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return is_ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  [[nodiscard]] Status status() const { return is_ok() ? Status::ok() : std::get<1>(v_); }

 private:
  std::variant<T, Status> v_;
};

/// Throws loom::Error if `s` failed. Used only at the public API boundary.
void throw_if_error(const Status& s);

template <typename T>
T value_or_throw(Result<T>&& r) {
  if (!r.is_ok()) throw_if_error(r.status());
  return std::move(r).value();
}

}  // namespace loom

#define LOOM_RETURN_IF_ERROR(expr)                  \
  do {                                              \
    ::loom::Status loom_status_ = (expr);           \
    if (!loom_status_.is_ok()) return loom_status_; \
  } while (0)

#define LOOM_CONCAT_INNER(a, b) a##b
#define LOOM_CONCAT(a, b) LOOM_CONCAT_INNER(a, b)
#define LOOM_ASSIGN_OR_RETURN(lhs, expr) \
  LOOM_ASSIGN_OR_RETURN_IMPL(LOOM_CONCAT(loom_result_, __LINE__), lhs, expr)
// `tmp` is an identifier and `lhs` a declaration or an lvalue: neither can be parenthesized.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define LOOM_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.is_ok()) return tmp.status();           \
  lhs = std::move(tmp).value()
// NOLINTEND(bugprone-macro-parentheses)
