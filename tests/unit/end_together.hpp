// run_ranks, ending together: for tests of failures reported to several ranks.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>

#include "comm_harness.hpp"

namespace loom::test {

/// run_ranks, but no rank destroys its communicator before every rank has its outcome: a rank
/// that leaves at once after its Mismatch makes the peers still in the call fail with PeerFailed
/// ("rank 1 closed the connection"), a different (and correct) report.
inline void run_together(int n, const std::function<void(Communicator&)>& body,
                         std::map<std::string, std::string> settings = {}) {
  EndTogether::Shared shared;
  run_ranks(
      n,
      [&](Communicator& comm) {
        EndTogether end(shared, n);
        body(comm);
      },
      std::move(settings));
}

}  // namespace loom::test
