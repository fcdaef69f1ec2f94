// ExecutorFirstMutex: a progress thread never takes the lock ahead of a waiting executor.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "common/executor_first_mutex.hpp"
#include "eventually.hpp"

using loom::test::eventually;

TEST_CASE("executor-first mutex: a waiting executor goes before the progress thread") {
  for (int round = 0; round < 20; ++round) {
    loom::ExecutorFirstMutex m;
    std::mutex order_mu;
    std::vector<char> order;
    auto record = [&](char who) {
      std::lock_guard<std::mutex> lk(order_mu);
      order.push_back(who);
    };
    auto held = m.executor();  // another executor call holds it
    std::thread executor([&] {
      auto lk = m.executor();
      record('e');
    });
    REQUIRE(eventually([&] { return m.waiting() == 1; }));
    std::atomic<bool> helper_started{false};
    std::thread helper([&] {
      helper_started = true;
      auto lk = m.helper();
      record('h');
    });
    REQUIRE(eventually([&] { return helper_started.load(); }));
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // let the helper reach the lock
    held.unlock();
    executor.join();
    helper.join();
    REQUIRE(order == std::vector<char>{'e', 'h'});
    CHECK(m.waiting() == 0);
  }
}

TEST_CASE("executor-first mutex: a looping progress thread does not starve the executor") {
  loom::ExecutorFirstMutex m;
  std::atomic<bool> stop{false};
  long counter = 0;  // guarded by m
  std::thread helper([&] {
    while (!stop.load()) {
      auto lk = m.helper();
      ++counter;  // re-takes the lock at once, as a polling progress thread does
    }
  });
  long seen = -1;
  for (int i = 0; i < 2000; ++i) {
    auto lk = m.executor();
    CHECK(counter >= seen);
    seen = counter;
  }
  stop = true;
  helper.join();
  CHECK(m.waiting() == 0);
}
