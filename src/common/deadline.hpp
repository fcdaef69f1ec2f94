// Deadlines: every wait inside loom has one.
#pragma once

#include <algorithm>
#include <chrono>

namespace loom {

using Clock = std::chrono::steady_clock;

class Deadline {
 public:
  /// `d` from now. Saturates instead of overflowing: a `d` longer than the clock can count
  /// (about 292 years in nanoseconds) is never(), a negative one is now (expired).
  static Deadline after(std::chrono::milliseconds d) { return after(d, Clock::now()); }
  /// `d` from `now` (a clock reading the caller has anyway).
  static Deadline after(std::chrono::milliseconds d, Clock::time_point now) {
    if (d <= std::chrono::milliseconds::zero()) return Deadline(now);
    const auto room =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::time_point::max() - now);
    return d >= room ? never() : Deadline(now + d);
  }
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
  /// Time left, never negative (`longest` when there is no deadline or more is left).
  [[nodiscard]] Clock::duration left(Clock::duration longest) const {
    if (at_ == Clock::time_point::max()) return longest;
    return std::clamp<Clock::duration>(at_ - Clock::now(), Clock::duration::zero(), longest);
  }

 private:
  Clock::time_point at_;
};

/// How long to sleep between two looks at something that signals no descriptor (a device
/// stream, a peer's FIFO): a sixteenth of the time already waited, from 20 us to `longest`. A
/// waiter so leaves its CPU to the work it waits for, yet notices completion within about 6% of
/// its wait.
inline Clock::duration backoff_nap(Clock::duration waited,
                                   Clock::duration longest = std::chrono::milliseconds(1)) {
  constexpr Clock::duration kShortest = std::chrono::microseconds(20);
  return std::clamp<Clock::duration>(waited / 16, kShortest, std::max(kShortest, longest));
}

}  // namespace loom
