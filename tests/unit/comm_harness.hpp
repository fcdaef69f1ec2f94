// Threads as ranks: n Communicators in one process over an InMemoryStore and real TCP loopback
// connections.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/memory_store.hpp"
#include "catch_threads.hpp"
#include "core/comm_setup.hpp"
#include "loom/loom.hpp"

namespace loom::test {

/// What went wrong on the rank threads, collected there and asserted on the main thread once
/// they have joined (Catch2's assertions are not made for several threads at once).
struct Findings {
  std::mutex mu;
  std::size_t wrong = 0;
  std::string first;
  void add(const std::string& what) {
    std::lock_guard lk(mu);
    if (wrong++ == 0) first = what;
  }
};

/// The loom::Error `call` throws, or nullopt when it throws none.
template <typename F>
std::optional<loom::Error> error_of(F&& call) {
  try {
    call();
  } catch (const loom::Error& e) {
    return e;
  }
  return std::nullopt;
}

/// Whether `e` is an error of `code` whose message contains every one of `parts`.
inline bool names(const std::optional<loom::Error>& e, ErrorCode code,
                  std::initializer_list<std::string> parts) {
  if (!e || e->code() != code) return false;
  const std::string msg = e->what();
  for (const auto& p : parts)
    if (msg.find(p) == std::string::npos) return false;
  return true;
}

/// Runs f, which must throw loom::Error, and returns the error (the test fails otherwise).
template <typename F>
loom::Error catch_error(F&& f) {
  try {
    f();
  } catch (const loom::Error& e) {
    return e;
  }
  FAIL("expected a loom::Error");
  return loom::Error(loom::ErrorCode::Ok, "");
}

inline Communicator make_comm(std::shared_ptr<bootstrap::Store> store, int rank, int n,
                              std::uint64_t comm_id,
                              const std::map<std::string, std::string>& settings) {
  auto cfg = value_or_throw(config::Config::load(settings));
  return detail::wrap_communicator(value_or_throw(
      detail::join_store(std::move(store), rank, n, comm_id, "127.0.0.1", std::move(cfg))));
}

/// Runs `body(r)` for r in [0, n) on n threads; rethrows the first failure (as a
/// std::runtime_error naming the rank) after every thread has finished.
inline void on_rank_threads(int n, const std::function<void(int)>& body) {
  std::mutex mu;
  std::string first_error;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (const std::exception& e) {
        std::lock_guard lock(mu);
        if (first_error.empty()) first_error = "rank " + std::to_string(r) + ": " + e.what();
      }
    });
  for (auto& t : threads) t.join();
  if (!first_error.empty()) throw std::runtime_error(first_error);
}

/// Holds each rank thread, at the end of its scope, until all n have reached it (or `timeout`
/// passed): declare it after the Communicator, so that no rank destroys its communicator while
/// another still completes its last messages (not for tests in which a rank leaves early). Ranks
/// that are threads of one process share the memory libfabric's shm provider maps for their
/// endpoints, so an endpoint closed early unmaps what a peer's provider still reads (a crash in
/// fi_cq_read); ranks that are processes each keep their own mapping.
class EndTogether {
 public:
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    int arrived = 0;
  };
  EndTogether(Shared& shared, int n, std::chrono::seconds timeout = std::chrono::seconds(60))
      : shared_(shared), n_(n), timeout_(timeout) {}
  ~EndTogether() {
    std::unique_lock lock(shared_.mu);
    ++shared_.arrived;
    shared_.cv.notify_all();
    shared_.cv.wait_for(lock, timeout_, [&] { return shared_.arrived >= n_; });
  }
  EndTogether(const EndTogether&) = delete;
  EndTogether& operator=(const EndTogether&) = delete;

 private:
  Shared& shared_;
  int n_;
  std::chrono::seconds timeout_;
};

/// Runs `body(comm)` on n threads, one communicator each; rethrows the first failure (as a
/// std::runtime_error naming the rank) after every thread has finished.
inline void run_ranks(int n, const std::function<void(Communicator&)>& body,
                      std::map<std::string, std::string> settings = {}) {
  if (!settings.count("LOOM_TIMEOUT")) settings["LOOM_TIMEOUT"] = "60s";
  auto store = std::make_shared<bootstrap::InMemoryStore>();
  static std::uint64_t next_id = 0x1000;
  std::uint64_t comm_id = ++next_id;
  on_rank_threads(n, [&](int r) {
    Communicator comm = make_comm(store, r, n, comm_id, settings);
    body(comm);
  });
}

}  // namespace loom::test
