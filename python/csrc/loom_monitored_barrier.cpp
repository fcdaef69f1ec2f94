// dist.monitored_barrier for the loom backend, as ProcessGroupGloo's: rank 0 waits (up to the
// timeout) for every other rank to reach the barrier and names the ranks that did not; the
// others wait for rank 0 to release them. It goes through the group's c10d store, not the
// loom communicator, so a rank that never arrives costs a timeout here and leaves the
// communicator usable (a loom receive that times out fails its communicator), and rank 0
// knows exactly which ranks arrived. The messages are Gloo's, which scripts match.
#include <c10/util/Exception.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "loom_backend.hpp"

namespace loom_torch {
namespace {

using Clock = std::chrono::steady_clock;

std::string arrived_key(const std::string& base, int rank) {
  return base + "arrived/" + std::to_string(rank);
}

// Polls the store until `key` exists or `deadline` passes.
bool arrives_by(c10d::Store& store, const std::string& key, Clock::time_point deadline) {
  auto nap = std::chrono::microseconds(200);
  for (;;) {
    if (store.check({key})) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(nap);
    nap = std::min<std::chrono::microseconds>(nap * 2, std::chrono::milliseconds(10));
  }
}

}  // namespace

void ProcessGroupLoom::monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) {
  const std::chrono::milliseconds timeout =
      opts.timeout == c10d::kUnsetTimeout ? call_timeout_.value_or(config_.timeout) : opts.timeout;
  const auto ms = std::to_string(timeout.count());
  const Clock::time_point start = Clock::now(), deadline = start + timeout;
  const std::string base = "loom/monitored_barrier/" + std::to_string(monitored_barriers_++) + "/";
  const int rank = getRank(), size = getSize();
  store_->set(arrived_key(base, rank), std::vector<uint8_t>{1});
  if (rank != 0) {
    if (!arrives_by(*store_, base + "release", deadline))
      TORCH_CHECK(false, "[Rank ", rank, "]: Rank ", rank,
                  " successfully reached monitoredBarrier, but received errors while waiting for "
                  "send/recv from rank 0. Please check rank 0 logs for faulty rank.");
    return;
  }
  std::vector<int> missing;
  for (int r = 1; r < size; ++r) {
    if (!waitAllRanks && Clock::now() >= deadline)
      TORCH_CHECK(false, "[Rank 0]: Rank 0 timed out in monitoredBarrier after ", ms, " ms.");
    if (arrives_by(*store_, arrived_key(base, r), deadline)) continue;
    if (!waitAllRanks)
      TORCH_CHECK(false, "[Rank 0]: Rank ", r, " failed to pass monitoredBarrier in ", ms, " ms");
    missing.push_back(r);
  }
  if (!missing.empty()) {
    std::string ranks;
    for (int r : missing) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    TORCH_CHECK(false, "[Rank 0]: Ranks ", ranks, " failed to pass monitoredBarrier in ", ms,
                " ms");
  }
  store_->set(base + "release", std::vector<uint8_t>{1});
}

}  // namespace loom_torch
