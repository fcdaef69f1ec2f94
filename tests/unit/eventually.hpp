// Bounded waits for a condition another thread makes true (test helper).
#pragma once

#include <chrono>
#include <thread>

namespace loom::test {

/// Waits until `pred` holds, yielding between looks; false after `limit`.
template <typename P>
bool eventually(P pred, std::chrono::milliseconds limit = std::chrono::milliseconds(10000)) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::yield();
  }
  return true;
}

}  // namespace loom::test
