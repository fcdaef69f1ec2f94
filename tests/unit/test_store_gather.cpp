// The store's gather (one request per rank, parked at the TCP server until every rank's value is
// in) and store_allgather on top of it: exact results, uneven sizes, one rank, the ranks a
// timeout names, and the requests an allgather costs the server.
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/memory_store.hpp"
#include "bootstrap/store.hpp"
#include "bootstrap/tcp_store.hpp"
#include "store_harness.hpp"

using namespace store_test;

namespace {

// Rank r's value: r * 1000 bytes (rank 0's is empty), so sizes are uneven.
bs::Bytes value_of(int r) {
  return bs::Bytes(static_cast<std::size_t>(r) * 1000, static_cast<std::uint8_t>(r * 7 + 1));
}

}  // namespace

TEST_CASE("bootstrap: a tcp gather returns every rank's value exactly, in rank order") {
  for (int n : {1, 2, 7, 33}) {
    INFO("n = " << n);
    auto server = start_server();
    std::vector<std::unique_ptr<bs::TcpStoreClient>> clients;
    for (int r = 0; r < n; ++r) clients.push_back(connect_client(*server, r));
    std::vector<loom::Result<std::vector<bs::Bytes>>> got(static_cast<std::size_t>(n),
                                                          loom::Status::ok());
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r)
      threads.emplace_back([&, r] {
        got[static_cast<std::size_t>(r)] = bs::store_allgather(
            *clients[static_cast<std::size_t>(r)], "g", r, n, value_of(r), Deadline::after(10s));
      });
    for (auto& t : threads) t.join();
    for (int r = 0; r < n; ++r) {
      INFO("rank " << r);
      auto& g = got[static_cast<std::size_t>(r)];
      REQUIRE(g.status().message() == "");
      REQUIRE(g->size() == static_cast<std::size_t>(n));
      for (int q = 0; q < n; ++q) CHECK((*g)[static_cast<std::size_t>(q)] == value_of(q));
    }
    // One SET and one GATHER per rank: O(n) requests at the server, not n^2 gets.
    const bs::StoreLoad load = server->load();
    CHECK(load.requests == static_cast<std::uint64_t>(2 * n));
    CHECK(load.gathers == static_cast<std::uint64_t>(n));
  }
}

TEST_CASE("bootstrap: a gather parks until the last rank publishes, and late gathers see it") {
  auto server = start_server();
  auto early = connect_client(*server, 0);
  auto late = connect_client(*server, 1);
  REQUIRE(early->set("p/0", bytes("zero")).is_ok());
  std::thread publisher([&] {
    std::this_thread::sleep_for(100ms);
    REQUIRE(late->set("p/1", bytes("one")).is_ok());
  });
  const auto start = Clock::now();
  auto g = early->gather("p", 2, Deadline::after(5s));
  publisher.join();
  REQUIRE(g.is_ok());
  CHECK(elapsed_ms(start) >= 90);
  CHECK(text((*g)[0]) == "zero");
  CHECK(text((*g)[1]) == "one");
  auto again = late->gather("p", 2, Deadline::after(0ms));  // complete: answered at once
  REQUIRE(again.is_ok());
  CHECK(text((*again)[1]) == "one");
  // An overwritten value is what later gathers see.
  REQUIRE(late->set("p/1", bytes("uno")).is_ok());
  CHECK(text(early->gather("p", 2, Deadline::after(0ms)).value()[1]) == "uno");
}

TEST_CASE("bootstrap: a gather missing members times out naming them, and the link stays usable") {
  auto server = start_server();
  auto c = connect_client(*server, 0);
  for (int r : {0, 1, 2, 6, 9}) REQUIRE(c->set("m/" + std::to_string(r), bytes("v")).is_ok());
  const auto start = Clock::now();
  auto g = c->gather("m", 10, Deadline::after(200ms));
  REQUIRE_FALSE(g.is_ok());
  CHECK(g.status().code() == ErrorCode::Timeout);
  CHECK(elapsed_ms(start) >= 150);
  CHECK_THAT(g.status().message(), Catch::Contains("'m'") && Catch::Contains("3-5, 7-8"));
  check_still_works(*c, "after a gather timed out");
  // Through store_allgather the rank and the job size are named too.
  auto a = bs::store_allgather(*c, "m", 0, 10, bytes("v"), Deadline::after(50ms));
  CHECK(a.status().code() == ErrorCode::Timeout);
  CHECK_THAT(a.status().message(),
             Catch::Contains("(rank 0 of 10)") && Catch::Contains("3-5, 7-8"));
  // A gather with another rank count is refused, naming both.
  auto other = c->gather("m", 11, Deadline::after(0ms));
  CHECK(other.status().code() == ErrorCode::InvalidArgument);
  CHECK_THAT(other.status().message(), Catch::Contains("11 ranks") && Catch::Contains("10 ranks"));
  // Erasing the keys restarts the count.
  REQUIRE(c->erase_prefix("m/").is_ok());
  auto empty = c->gather("m", 10, Deadline::after(0ms));
  CHECK_THAT(empty.status().message(), Catch::Contains("0-9"));
}

TEST_CASE("bootstrap: the in-memory store's gather names the missing ranks too") {
  bs::InMemoryStore s;
  REQUIRE(s.set("q/1", bytes("a")).is_ok());
  auto g = s.gather("q", 3, Deadline::after(20ms));
  CHECK(g.status().code() == ErrorCode::Timeout);
  CHECK_THAT(g.status().message(), Catch::Contains("0, 2"));
  REQUIRE(s.set("q/0", bytes("")).is_ok());
  REQUIRE(s.set("q/2", bytes("ccc")).is_ok());
  auto ok = s.gather("q", 3, Deadline::after(20ms));
  REQUIRE(ok.is_ok());
  CHECK(text((*ok)[2]) == "ccc");
}
