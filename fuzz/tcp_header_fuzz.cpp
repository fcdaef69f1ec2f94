// libFuzzer target: the tcp transport's data header check (every field validated before any
// payload byte is read) and the rendering of whatever tag a peer sent.
#include <cstdint>
#include <cstring>

#include "transports/tcp/wire.hpp"

namespace tcp = loom::transport::tcp;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  tcp::MessageHeader got;
  if (size < sizeof got) return 0;
  std::memcpy(&got, data, sizeof got);
  loom::transport::Tag expected;
  std::uint64_t posted = 0;
  if (size >= sizeof got + sizeof expected + sizeof posted) {
    std::memcpy(&expected, data + sizeof got, sizeof expected);
    std::memcpy(&posted, data + sizeof got + sizeof expected, sizeof posted);
  }
  const std::uint64_t comm_id = 0x1234;
  auto check = tcp::check_header(got, comm_id, expected, posted);
  if (check == tcp::HeaderCheck::Ok) {
    // Accepted: it must be exactly what was posted.
    if (got.comm_id != comm_id || !(got.tag == expected) || got.length != posted) __builtin_trap();
  }
  // Error messages render both tags, whatever their contents.
  (void)loom::transport::describe_tag(got.tag);
  (void)loom::transport::describe_tag(expected);
  return 0;
}
