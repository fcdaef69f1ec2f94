// Asynchronous handle returned by every collective call.
#pragma once

#include <chrono>
#include <memory>
#include <optional>

namespace loom {

namespace detail {
class OpState;
}

/// Completion handle of one collective. Copyable; all copies observe the same operation.
/// The operation progresses in the background whether or not anyone waits on it.
class Work {
 public:
  Work() = default;
  explicit Work(std::shared_ptr<detail::OpState> state) : state_(std::move(state)) {}

  /// Blocks until the operation completes; throws loom::Error if it failed or its deadline
  /// passed. `timeout`, when given, bounds this wait only (the operation keeps its own deadline).
  void wait(std::optional<std::chrono::milliseconds> timeout = std::nullopt) const;
  /// Non-blocking: true once complete; throws loom::Error if the operation failed.
  [[nodiscard]] bool test() const;
  [[nodiscard]] bool valid() const noexcept { return state_ != nullptr; }

 private:
  std::shared_ptr<detail::OpState> state_;
};

}  // namespace loom
