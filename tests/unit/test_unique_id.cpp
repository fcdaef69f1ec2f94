// Tests of loom::UniqueId: the byte and hex forms, validation, for_root and create.
#include <catch2/catch.hpp>
#include <chrono>
#include <string>

#include "bootstrap/tcp_store.hpp"
#include "common/socket.hpp"
#include "loom/error.hpp"
#include "loom/unique_id.hpp"

using namespace std::chrono_literals;
using loom::ErrorCode;
using loom::UniqueId;

namespace {

template <typename Fn>
ErrorCode error_of(Fn fn) {
  try {
    fn();
  } catch (const loom::Error& e) {
    return e.code();
  }
  return ErrorCode::Ok;
}

}  // namespace

TEST_CASE("bootstrap: UniqueId bytes and hex round trip") {
  const UniqueId id = UniqueId::for_root("node7:29500", "00112233445566778899aabbccddeeff");
  CHECK(id.root_address() == "node7:29500");
  CHECK(id.root_served_by_rank0());
  CHECK(id.secret()[1] == 0x11);
  CHECK(id.secret()[15] == 0xff);
  CHECK(id.comm_id() != 0);

  const auto bytes = id.to_bytes();
  CHECK(UniqueId::from_bytes(bytes) == id);
  const std::string hex = id.to_string();
  CHECK(hex.size() == 2 * UniqueId::kBytes);
  CHECK(hex.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(UniqueId::from_string(hex) == id);
  std::string upper = hex;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  CHECK(UniqueId::from_string(" " + upper + "\n") == id);

  const UniqueId v6 = UniqueId::for_root("[fd00::2]:1");
  CHECK(UniqueId::from_string(v6.to_string()) == v6);
  CHECK(UniqueId::from_bytes(UniqueId().to_bytes()) == UniqueId());
}

TEST_CASE("bootstrap: UniqueId::for_root is deterministic") {
  const auto a = UniqueId::for_root("10.0.0.1:29500", "abcd");
  CHECK(UniqueId::for_root("10.0.0.1:29500", "abcd") == a);
  CHECK(a.secret()[0] == 0xab);
  CHECK(a.secret()[2] == 0);
  CHECK(UniqueId::for_root("10.0.0.1:29500", "abce").comm_id() != a.comm_id());
  CHECK(UniqueId::for_root("10.0.0.1:29501", "abcd").comm_id() != a.comm_id());
  const auto no_secret = UniqueId::for_root("10.0.0.1:29500");
  CHECK(no_secret.secret() == std::array<std::uint8_t, 16>{});

  for (const char* bad_secret : {"xyz1", "abc", "00112233445566778899aabbccddeeff00"}) {
    INFO(bad_secret);
    CHECK(error_of([&] { UniqueId::for_root("h:1", bad_secret); }) == ErrorCode::InvalidArgument);
  }
  for (const char* bad_root : {"", "nohost", "host:0", "host:x", "a b:1", "[::1"}) {
    INFO(bad_root);
    CHECK(error_of([&] { UniqueId::for_root(bad_root); }) == ErrorCode::InvalidArgument);
  }
  CHECK(error_of([] { UniqueId::for_root(std::string(100, 'h') + ":1"); }) ==
        ErrorCode::InvalidArgument);
}

TEST_CASE("bootstrap: UniqueId rejects garbage") {
  const auto good = UniqueId::for_root("127.0.0.1:5000").to_bytes();
  auto rejects = [](std::array<std::uint8_t, UniqueId::kBytes> b) {
    return error_of([&] { UniqueId::from_bytes(b); }) == ErrorCode::InvalidArgument;
  };
  CHECK(rejects({}));
  auto b = good;
  b[0] ^= 1;  // magic
  CHECK(rejects(b));
  b = good;
  b[4] = 9;  // version
  CHECK(rejects(b));
  b = good;
  b[6] |= 0x80;  // unknown flag
  CHECK(rejects(b));
  b = good;
  b[7] = 200;  // root length
  CHECK(rejects(b));
  b = good;
  b[127] = 1;  // padding
  CHECK(rejects(b));
  b = good;
  b[32] = '\n';  // unprintable root
  CHECK(rejects(b));
  std::array<std::uint8_t, UniqueId::kBytes> noise{};
  for (std::size_t i = 0; i < noise.size(); ++i) noise[i] = static_cast<std::uint8_t>(i * 97 + 13);
  CHECK(rejects(noise));

  const std::string hex = UniqueId::for_root("127.0.0.1:5000").to_string();
  for (const std::string& bad :
       {std::string(), hex.substr(1), hex + "00", "zz" + hex.substr(2), std::string(256, '0')}) {
    CHECK(error_of([&] { UniqueId::from_string(bad); }) == ErrorCode::InvalidArgument);
  }
}

TEST_CASE("bootstrap: UniqueId::create starts a connectable server") {
  const UniqueId id = UniqueId::create("127.0.0.1");
  CHECK_FALSE(id.root_served_by_rank0());
  CHECK(id.comm_id() != 0);
  CHECK(id.root_address().rfind("127.0.0.1:", 0) == 0);
  CHECK(UniqueId::from_string(id.to_string()) == id);

  auto addr = loom::net::resolve(id.root_address());
  REQUIRE(addr.is_ok());
  CHECK(addr.value().port() != 0);
  auto client = loom::bootstrap::TcpStoreClient::connect(addr.value(), id.comm_id(), 0,
                                                         loom::Deadline::after(2s), id.secret());
  REQUIRE(client.is_ok());
  const std::uint8_t v[] = {1, 2, 3};
  REQUIRE(client.value()->set("k", v).is_ok());
  auto got = client.value()->get("k", loom::Deadline::after(2s));
  REQUIRE(got.is_ok());
  CHECK(got.value().size() == 3);

  const UniqueId other = UniqueId::create("127.0.0.1:0");
  CHECK(other.comm_id() != id.comm_id());
  CHECK(other.secret() != id.secret());
  CHECK(other.root_address() != id.root_address());
}

TEST_CASE("bootstrap: UniqueId::create with the default address") {
  const UniqueId id = UniqueId::create();
  auto hp = loom::net::parse_host_port(id.root_address());
  REQUIRE(hp.is_ok());
  CHECK(hp.value().port != 0);
  CHECK(hp.value().host != "0.0.0.0");
  CHECK(error_of([] { UniqueId::create("127.0.0.1:notaport"); }) == ErrorCode::InvalidArgument);
}
