// Deadlines: every wait inside loom has one.
#pragma once

#include <chrono>

namespace loom {

using Clock = std::chrono::steady_clock;

class Deadline {
 public:
  static Deadline after(std::chrono::milliseconds d) { return Deadline(Clock::now() + d); }
  static Deadline never() { return Deadline(Clock::time_point::max()); }
  explicit Deadline(Clock::time_point t) : at_(t) {}

  [[nodiscard]] bool expired() const { return Clock::now() >= at_; }
  [[nodiscard]] Clock::time_point at() const { return at_; }
  /// Milliseconds left, clamped to [0, cap_ms]; for poll(2).
  [[nodiscard]] int poll_timeout_ms(int cap_ms) const {
    if (at_ == Clock::time_point::max()) return cap_ms;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(at_ - Clock::now()).count();
    if (left <= 0) return 0;
    return left < cap_ms ? static_cast<int>(left) : cap_ms;
  }
  [[nodiscard]] Deadline earliest(const Deadline& o) const { return at_ < o.at_ ? *this : o; }

 private:
  Clock::time_point at_;
};

}  // namespace loom
