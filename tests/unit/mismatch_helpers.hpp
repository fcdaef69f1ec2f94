// Helpers of the tests of mismatched calls (threads as ranks): the failure a call ends with on a
// rank, and the checks that it is a Mismatch naming both ranks, in time.
#pragma once

#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include "loom/loom.hpp"

namespace loom::test {

using MismatchClock = std::chrono::steady_clock;

inline double seconds_since(MismatchClock::time_point t0) {
  return std::chrono::duration<double>(MismatchClock::now() - t0).count();
}

/// The failure that `call` ends with on this rank: its own error, or (it completed) the
/// communicator's asynchronous error, waited for up to `wait`.
inline std::optional<Error> failure_after(Communicator& comm, const std::function<void()>& call,
                                          std::chrono::milliseconds wait) {
  try {
    call();
  } catch (const Error& e) {
    return e;
  }
  const auto until = MismatchClock::now() + wait;
  while (MismatchClock::now() < until) {
    if (auto e = comm.async_error()) return e;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return std::nullopt;
}

/// `e` must be a Mismatch naming ranks `a` and `b`, reached within `within` of `t0`.
inline void expect_mismatch(const std::optional<Error>& e, int a, int b,
                            MismatchClock::time_point t0, int rank,
                            std::chrono::milliseconds within) {
  INFO("rank " << rank << ": " << (e ? e->what() : "no error"));
  CHECK(e.has_value());
  if (!e) return;  // (REQUIRE would throw out of the rank's thread)
  CHECK(e->code() == ErrorCode::Mismatch);
  CHECK_THAT(e->what(), Catch::Matchers::Contains("rank " + std::to_string(a)) &&
                            Catch::Matchers::Contains("rank " + std::to_string(b)));
  CHECK(seconds_since(t0) < std::chrono::duration<double>(within).count());
}

}  // namespace loom::test
