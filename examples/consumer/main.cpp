// Built against an installed or a vendored loom (see CMakeLists.txt): N ranks as threads of one
// process join with a UniqueId, allreduce and allgather, and check the results. Exit status 0 when
// right.
//
//   loom-consumer 4
#include <cstdio>
#include <cstdlib>
#include <loom/loom.hpp>
#include <thread>
#include <vector>

namespace {

bool run_rank(const loom::UniqueId& id, int rank, int nranks) {
  loom::Communicator comm(id, rank, nranks);
  std::vector<double> grad(1000, rank + 1.0);
  comm.allreduce(std::span<double>(grad), loom::RedOp::Sum).wait();
  const double expected = nranks * (nranks + 1) / 2.0;
  bool ok = true;
  for (double g : grad) ok = ok && g == expected;
  std::vector<std::int32_t> mine(3, rank), all(3 * static_cast<std::size_t>(nranks));
  comm.allgather(std::span<const std::int32_t>(mine), std::span<std::int32_t>(all)).wait();
  for (std::size_t i = 0; i < all.size(); ++i) ok = ok && all[i] == static_cast<int>(i / 3);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  const int nranks = argc > 1 ? std::atoi(argv[1]) : 2;
  std::printf("loom %s, %d ranks\n", loom::kVersionString, nranks);
  const loom::UniqueId id = loom::UniqueId::create("127.0.0.1");
  std::vector<int> ok(static_cast<std::size_t>(nranks), 0);
  std::vector<std::thread> ranks;
  ranks.reserve(static_cast<std::size_t>(nranks));
  for (int r = 0; r < nranks; ++r)
    ranks.emplace_back([&, r] {
      try {
        ok[static_cast<std::size_t>(r)] = run_rank(id, r, nranks) ? 1 : 0;
      } catch (const loom::Error& e) {
        std::fprintf(stderr, "rank %d: %s\n", r, e.what());
      }
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < nranks; ++r)
    if (!ok[static_cast<std::size_t>(r)]) {
      std::printf("rank %d: WRONG\n", r);
      return 1;
    }
  std::printf("consumer: allreduce and allgather correct on %d ranks\n", nranks);
  return 0;
}
