// Forced trees over real communicators whose ranks claim different hosts (LOOM_HOST_ID): the
// per-host trees (chains inside hosts, trees across leaders) give exact results for allreduce,
// broadcast and reduce, in place and out of place.
#include <catch2/catch.hpp>

#include "comm_harness.hpp"

using namespace loom;

namespace {

void run_hosts(const std::vector<std::string>& host_ids, const std::string& algo) {
  const int n = static_cast<int>(host_ids.size());
  auto store = std::make_shared<bootstrap::InMemoryStore>();
  static std::uint64_t next_id = 0x7ee000;
  const std::uint64_t id = ++next_id;
  std::vector<std::string> errors(static_cast<std::size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        Communicator comm =
            test::make_comm(store, r, n, id,
                            {{"LOOM_TIMEOUT", "60s"},
                             {"LOOM_ALGO", algo},
                             {"LOOM_CHUNK_SIZE", "1K"},
                             {"LOOM_HOST_ID", host_ids[static_cast<std::size_t>(r)]}});
        for (std::size_t count : {std::size_t{1}, std::size_t{999}, std::size_t{5000}})
          for (bool ip : {false, true}) {
            std::vector<std::int64_t> in(count), out(count, -7);
            for (std::size_t i = 0; i < count; ++i)
              in[i] = static_cast<std::int64_t>(i) * 1000 + r + 1;
            std::int64_t* dst = ip ? in.data() : out.data();
            comm.allreduce(in.data(), dst, count, DataType::Int64, RedOp::Sum).wait();
            for (std::size_t i = 0; i < count; ++i)
              if (dst[i] != static_cast<std::int64_t>(i) * 1000 * n + n * (n + 1) / 2)
                throw std::runtime_error("allreduce wrong at " + std::to_string(i));
            const int root = static_cast<int>(count % static_cast<std::size_t>(n));
            for (std::size_t i = 0; i < count; ++i)
              in[i] = r == root ? static_cast<std::int64_t>(i) * 3 : -1;
            std::fill(out.begin(), out.end(), -7);
            comm.broadcast(in.data(), dst, count, DataType::Int64, root).wait();
            for (std::size_t i = 0; i < count; ++i)
              if (dst[i] != static_cast<std::int64_t>(i) * 3)
                throw std::runtime_error("broadcast wrong at " + std::to_string(i));
            for (std::size_t i = 0; i < count; ++i) in[i] = static_cast<std::int64_t>(i) + r;
            comm.reduce(in.data(), dst, count, DataType::Int64, RedOp::Sum, root).wait();
            if (r == root)
              for (std::size_t i = 0; i < count; ++i)
                if (dst[i] != static_cast<std::int64_t>(i) * n + n * (n - 1) / 2)
                  throw std::runtime_error("reduce wrong at " + std::to_string(i));
          }
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r);
    REQUIRE(errors[static_cast<std::size_t>(r)].empty());
  }
}

}  // namespace

TEST_CASE("tree: per-host trees over fake hosts are exact", "[tree]") {
  run_hosts({"a", "a", "b", "b"}, "tree");
  run_hosts({"a", "b", "a", "b", "c", "c"}, "tree");
  run_hosts({"a", "b", "c"}, "tree");  // one rank per host: flat trees
  run_hosts({"a", "a", "a", "b", "b"}, "auto");
}
