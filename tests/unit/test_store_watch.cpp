// The store's watch (one request parked at the TCP server until one of several keys is set: how
// the failure monitor learns of records, status requests and vanished clients without polling),
// its second connection, and interrupting a blocked watch.
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

TEST_CASE("bootstrap: a tcp watch parks until one of its keys is set and names it") {
  auto server = start_server();
  auto watcher = connect_client(*server, 0);
  auto writer = connect_client(*server, 1);
  std::thread later([&] {
    std::this_thread::sleep_for(100ms);
    REQUIRE(writer->set("w/b", bytes("x")).is_ok());
  });
  const auto start = Clock::now();
  auto hit = watcher->watch({"w/a", "w/b", "w/c"}, Deadline::after(5s));
  later.join();
  REQUIRE(hit.is_ok());
  CHECK(*hit == 1);
  CHECK(elapsed_ms(start) >= 90);
  // A key already there answers at once; none there by the deadline: Timeout, link in sync.
  CHECK(watcher->watch({"w/z", "w/b"}, Deadline::after(0ms)).value() == 1);
  auto none = watcher->watch({"w/y", "w/z"}, Deadline::after(100ms));
  CHECK(none.status().code() == ErrorCode::Timeout);
  check_still_works(*watcher, "after a watch timed out");
  // Setting another of its keys after it was answered wakes nothing stale.
  REQUIRE(writer->set("w/a", bytes("y")).is_ok());
  check_still_works(*watcher, "after a stale key was set");
  // One request each, however long they waited.
  CHECK(server->load().requests <= 12);
}

TEST_CASE("bootstrap: a client that vanishes sets the next gone key, waking watches") {
  auto server = start_server();
  auto watcher = connect_client(*server, 0);
  net::Fd doomed = raw_hello(*server, {}, fake_hello(5, 4242, "h5"));
  std::thread killer([&] {
    std::this_thread::sleep_for(100ms);
    doomed.reset();  // closes without a goodbye
  });
  auto hit = watcher->watch({"nothing", bs::gone_key(1)}, Deadline::after(5s));
  killer.join();
  REQUIRE(hit.is_ok());
  CHECK(*hit == 1);
  auto line = watcher->get(bs::gone_key(1), Deadline::after(1s));
  REQUIRE(line.is_ok());
  CHECK(text(*line) == "5 4242 h5");
  auto gone = watcher->gone(Deadline::after(1s));
  REQUIRE(gone.is_ok());
  REQUIRE(gone->size() == 1);
  CHECK((*gone)[0].rank == 5);
}

TEST_CASE("bootstrap: a watch link is a second connection, and interrupt ends its wait at once") {
  auto server = start_server();
  auto client = connect_client(*server, 3);
  auto link = client->watch_link(Deadline::after(5s));
  REQUIRE(link.is_ok());
  REQUIRE(*link != nullptr);
  loom::Result<int> hit = loom::Status::ok();
  std::thread blocked([&] { hit = (*link)->watch({"never"}, Deadline::after(30s)); });
  std::this_thread::sleep_for(100ms);
  check_still_works(*client, "while the link waits");  // the first connection is not held up
  const auto start = Clock::now();
  (*link)->interrupt();
  blocked.join();
  CHECK(elapsed_ms(start) < 1000);
  CHECK(hit.status().code() == ErrorCode::Aborted);
  CHECK_FALSE((*link)->server_lost());
}

TEST_CASE("bootstrap: the in-memory store's watch looks until a key is set") {
  bs::InMemoryStore s;
  std::thread later([&] {
    std::this_thread::sleep_for(60ms);
    REQUIRE(s.set("k2", bytes("v")).is_ok());
  });
  auto hit = s.watch({"k1", "k2"}, Deadline::after(5s));
  later.join();
  REQUIRE(hit.is_ok());
  CHECK(*hit == 1);
  CHECK(s.watch({"k1"}, Deadline::after(20ms)).status().code() == ErrorCode::Timeout);
  auto none = s.watch_link(Deadline::after(1s));
  REQUIRE(none.is_ok());
  CHECK(*none == nullptr);
}

TEST_CASE("bootstrap: a vanished client ends the waits that ask for it, and only those") {
  auto server = start_server();
  auto waiter = connect_client(*server, 0);
  auto plain = connect_client(*server, 1);
  REQUIRE(waiter->waits_end_on_gone());
  net::Fd doomed = raw_hello(*server, {}, fake_hello(5, 4242, "h5"));
  loom::Result<bs::Bytes> plain_get = loom::Status::ok();
  std::thread other([&] { plain_get = plain->get("never", Deadline::after(1500ms)); });
  std::thread killer([&] {
    std::this_thread::sleep_for(150ms);
    doomed.reset();  // closes without a goodbye
  });
  // Parked until the vanish, not until the deadline: a Timeout naming the missing ranks.
  auto start = Clock::now();
  auto g = waiter->gather_or_gone("g", 2, Deadline::after(20s));
  killer.join();
  CHECK(g.status().code() == ErrorCode::Timeout);
  CHECK_THAT(g.status().message(), Catch::Matchers::Contains("0-1"));
  CHECK(elapsed_ms(start) >= 140);
  CHECK(elapsed_ms(start) < 5000);
  // Told once: the next such wait parks until its own deadline (or the key).
  start = Clock::now();
  CHECK(waiter->get_or_gone("k", Deadline::after(300ms)).status().code() == ErrorCode::Timeout);
  CHECK(elapsed_ms(start) >= 290);
  // A plain get of another client was not ended by the vanish.
  other.join();
  CHECK(plain_get.status().code() == ErrorCode::Timeout);
  // A connection not told yet (a new one) hears of it at once, then waits normally.
  auto late = connect_client(*server, 2);
  start = Clock::now();
  CHECK(late->get_or_gone("k", Deadline::after(10s)).status().code() == ErrorCode::Timeout);
  CHECK(elapsed_ms(start) < 1000);
  std::thread writer([&] {
    std::this_thread::sleep_for(100ms);
    REQUIRE(waiter->set("k", bytes("v")).is_ok());
  });
  auto got = late->get_or_gone("k", Deadline::after(10s));
  writer.join();
  REQUIRE(got.is_ok());
  CHECK(text(*got) == "v");
  check_still_works(*waiter, "after its waits were ended");
}

TEST_CASE("bootstrap: a process is gone when its last connection vanishes, not before") {
  auto server = start_server();
  auto watcher = connect_client(*server, 0);
  net::Fd main_link = raw_hello(*server, {}, fake_hello(5, 4242, "h5"));
  net::Fd watch_link = raw_hello(*server, {}, fake_hello(5, 4242, "h5"));
  watch_link.reset();  // one of its two connections closes without a goodbye: it still runs
  std::this_thread::sleep_for(200ms);
  auto gone = watcher->gone(Deadline::after(1s));
  REQUIRE(gone.is_ok());
  CHECK(gone->empty());
  main_link.reset();  // its last one: gone
  auto hit = watcher->watch({bs::gone_key(1)}, Deadline::after(5s));
  REQUIRE(hit.is_ok());
  gone = watcher->gone(Deadline::after(1s));
  REQUIRE(gone.is_ok());
  REQUIRE(gone->size() == 1);
  CHECK((*gone)[0].rank == 5);
}
