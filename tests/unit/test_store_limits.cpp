// The rendezvous store's defences and bookkeeping: a second claim of a rank is refused naming
// both processes, silent connections are dropped at their hello deadline, a rank's storage is
// bounded, finished communicators' keys can be erased, and clients that vanish without a
// goodbye are listed (how ranks learn of a death while a communicator is being created).
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>

#include "bootstrap/memory_store.hpp"
#include "bootstrap/tcp_store.hpp"
#include "store_harness.hpp"

using namespace store_test;

TEST_CASE("bootstrap: the store refuses a second process claiming a held rank, naming both") {
  auto server = start_server();
  auto first = connect_client(*server, 1);
  check_still_works(*first, "mine");
  // Another process (pid, host) presents rank 1: refused with the holder named.
  net::Fd other = raw_hello_unchecked(*server, {}, fake_hello(1, 424242, "otherhost"));
  std::array<std::uint8_t, wire::kAckBytes> ack{};
  REQUIRE(net::recv_all(other.get(), ack.data(), ack.size(), Deadline::after(2s), "ack").is_ok());
  CHECK(wire::get_u16(&ack[6]) == static_cast<std::uint16_t>(wire::AckStatus::DuplicateRank));
  std::uint8_t len[2] = {};
  REQUIRE(net::recv_all(other.get(), len, 2, Deadline::after(2s), "len").is_ok());
  std::string why(wire::get_u16(len), '\0');
  REQUIRE(net::recv_all(other.get(), why.data(), why.size(), Deadline::after(2s), "text").is_ok());
  CHECK_THAT(why, Catch::Contains("rank 1 is already held by pid " + std::to_string(::getpid())));
  CHECK_THAT(why, Catch::Contains("pid 424242 on host otherhost"));
  CHECK(server_drops(other.get()));
  // The holder is undisturbed; the same process may open more clients with that rank.
  check_still_works(*first, "still mine");
  auto again = connect_client(*server, 1);
  check_still_works(*again, "same process");
  // Once the holder is gone, the rank is free again.
  first.reset();
  again.reset();
  net::Fd later = raw_hello(*server, {}, fake_hello(1, 424242, "otherhost"));
}

TEST_CASE("bootstrap: a tcp client refused as a duplicate says who holds the rank") {
  auto server = start_server();
  net::Fd holder = raw_hello(*server, {}, fake_hello(2, 515151, "nodeA"));
  auto c = bs::TcpStoreClient::connect(server->address(), kCommId, 2, Deadline::after(5s));
  REQUIRE_FALSE(c.is_ok());
  CHECK(c.status().code() == ErrorCode::InvalidUsage);
  CHECK_THAT(c.status().message(), Catch::Contains("refused this process"));
  CHECK_THAT(c.status().message(), Catch::Contains("pid 515151 on host nodeA"));
}

TEST_CASE("bootstrap: the store drops connections that do not authenticate in time") {
  bs::ServerOptions o;
  o.hello_timeout = 300ms;
  auto server = start_server(kCommId, o);
  std::vector<net::Fd> idle;
  for (int i = 0; i < 5; ++i) {
    auto fd = net::connect_with_retry(server->address(), Deadline::after(2s));
    REQUIRE(fd.is_ok());
    idle.push_back(std::move(fd).value());
  }
  // Real ranks are not delayed by them.
  const auto start = Clock::now();
  auto c = connect_client(*server, 0);
  check_still_works(*c, "despite idle connections");
  CHECK(elapsed_ms(start) < 250);
  for (auto& fd : idle) CHECK(server_drops(fd.get(), 3s));
  CHECK(elapsed_ms(start) >= 250);
}

TEST_CASE("bootstrap: the store keeps at most max_pending unauthenticated connections") {
  bs::ServerOptions o;
  o.max_pending = 4;
  auto server = start_server(kCommId, o);
  std::vector<net::Fd> idle;
  for (int i = 0; i < 8; ++i) {
    auto fd = net::connect_with_retry(server->address(), Deadline::after(2s));
    REQUIRE(fd.is_ok());
    idle.push_back(std::move(fd).value());
  }
  auto c = connect_client(*server, 0);  // the newest pending connection; it authenticates
  check_still_works(*c, "flooded");
  for (int i = 0; i < 4; ++i) CHECK(server_drops(idle[static_cast<std::size_t>(i)].get()));
}

TEST_CASE("bootstrap: the pending cap grows with the job's members, and only with them") {
  bs::ServerOptions o;
  o.max_pending = 4;
  o.members = 12;  // a job of 12 ranks may all be in their hello at once
  auto server = start_server(kCommId, o);
  std::vector<net::Fd> idle;
  for (int i = 0; i < 16; ++i) {
    auto fd = net::connect_with_retry(server->address(), Deadline::after(2s));
    REQUIRE(fd.is_ok());
    idle.push_back(std::move(fd).value());
  }
  // 16 = 4 + 12: nobody dropped yet; every one still gets its challenge.
  for (auto& fd : idle) {
    std::array<std::uint8_t, wire::kChallengeBytes> challenge{};
    CHECK(net::recv_all(fd.get(), challenge.data(), challenge.size(), Deadline::after(2s),
                        "challenge")
              .is_ok());
  }
  CHECK_FALSE(server_drops(idle[0].get(), 200ms));
  // Two more: the two oldest go, the cap stays at 16.
  for (int i = 0; i < 2; ++i) {
    auto fd = net::connect_with_retry(server->address(), Deadline::after(2s));
    REQUIRE(fd.is_ok());
    idle.push_back(std::move(fd).value());
  }
  CHECK(server_drops(idle[0].get()));
  CHECK(server_drops(idle[1].get()));
  CHECK_FALSE(server_drops(idle[2].get(), 200ms));
}

TEST_CASE("bootstrap: an authenticated member's rank raises the caps of a server sized for none") {
  bs::ServerOptions o;
  o.max_pending = 2;
  auto server = start_server(kCommId, o);
  auto member = connect_client(*server, 9);  // rank 9: the job has at least 10 members
  std::vector<net::Fd> idle;
  for (int i = 0; i < 12; ++i) {
    auto fd = net::connect_with_retry(server->address(), Deadline::after(2s));
    REQUIRE(fd.is_ok());
    idle.push_back(std::move(fd).value());
  }
  CHECK_FALSE(server_drops(idle[0].get(), 200ms));  // 12 = 2 + 10 pending: all kept
  auto fd = net::connect_with_retry(server->address(), Deadline::after(2s));
  REQUIRE(fd.is_ok());
  CHECK(server_drops(idle[0].get()));  // the 13th: the oldest goes
  check_still_works(*member, "member unaffected");
}

TEST_CASE("bootstrap: a rank's store usage is bounded by its quota") {
  bs::ServerOptions o;
  o.client_quota = 64 * 1024;
  auto server = start_server(kCommId, o);
  auto greedy = connect_client(*server, 3);
  auto other = connect_client(*server, 4);
  const std::string chunk(8 * 1024, 'x');
  int stored = 0;
  loom::Status refused;
  for (int i = 0; i < 32 && refused.is_ok(); ++i) {
    refused = greedy->set("greedy/" + std::to_string(i), bytes(chunk));
    if (refused.is_ok()) ++stored;
  }
  CHECK(stored >= 6);
  CHECK(stored < 8);
  CHECK(refused.code() == ErrorCode::InvalidArgument);
  CHECK_THAT(refused.message(), Catch::Contains("quota"));
  // Overwriting a key it holds does not count twice; erasing frees its share.
  CHECK(greedy->set("greedy/0", bytes(chunk)).is_ok());
  check_still_works(*other, "others unaffected");
  auto erased = greedy->erase_prefix("greedy/");
  REQUIRE(erased.is_ok());
  CHECK(erased.value() == stored);
  CHECK(greedy->set("greedy/again", bytes(chunk)).is_ok());
}

TEST_CASE("bootstrap: erase_prefix removes exactly the keys under the prefix") {
  auto server = start_server();
  auto c = connect_client(*server, 0);
  for (const char* k : {"loom/1/a", "loom/1/b/c", "loom/10/a", "loom/2/a"})
    REQUIRE(c->set(k, bytes("v")).is_ok());
  auto n = c->erase_prefix("loom/1/");
  REQUIRE(n.is_ok());
  CHECK(n.value() == 2);
  CHECK(c->get("loom/1/a", Deadline::after(0ms)).status().code() == ErrorCode::Timeout);
  CHECK(c->get("loom/10/a", Deadline::after(0ms)).is_ok());
  CHECK(c->get("loom/2/a", Deadline::after(0ms)).is_ok());
  bs::InMemoryStore m;
  REQUIRE(m.set("loom/1/a", bytes("v")).is_ok());
  REQUIRE(m.set("loom/10/a", bytes("v")).is_ok());
  CHECK(m.erase_prefix("loom/1/").value() == 1);
  CHECK(m.size() == 1);
}

TEST_CASE("bootstrap: the store lists clients that vanish without a goodbye, not others") {
  auto server = start_server();
  auto watcher = connect_client(*server, 0);
  {
    auto polite = connect_client(*server, 1);
    check_still_works(*polite, "polite");
  }  // destroyed: says goodbye
  {
    net::Fd crashed = raw_hello(*server, {}, fake_hello(2, 777777, "crashhost"));
  }  // closed without a goodbye, as a killed process's socket is
  std::vector<bs::GoneClient> gone;
  for (int i = 0; i < 100 && gone.empty(); ++i) {
    auto g = watcher->gone(Deadline::after(2s));
    REQUIRE(g.is_ok());
    gone = g.value();
    if (gone.empty()) std::this_thread::sleep_for(10ms);
  }
  REQUIRE(gone.size() == 1);
  CHECK(gone[0].rank == 2);
  CHECK(gone[0].pid == 777777u);
  CHECK(gone[0].host == "crashhost");
  auto clients = server->clients();
  REQUIRE(clients.size() == 1);
  CHECK(clients[0].rank == 0);
  CHECK(clients[0].pid == static_cast<std::uint32_t>(::getpid()));
}
