// libFuzzer target: every parser of bytes that arrive from the bootstrap store: the store's
// hello (with its proof) and request/response headers, counters, and the failure-sharing and
// hang-attribution records other ranks post.
#include <cstdint>
#include <string_view>

#include "bootstrap/store.hpp"
#include "bootstrap/tcp_store_wire.hpp"
#include "common/crypto.hpp"
#include "core/failure_monitor.hpp"

namespace wire = loom::bootstrap::wire;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::uint8_t which = data[0];
  ++data;
  --size;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  switch (which % 6) {
    case 0:
      if (size >= wire::kHelloBytes) {
        auto h = wire::decode_hello(data);
        (void)h;
        loom::crypto::Nonce nonce{};
        loom::crypto::Mac proof{};
        std::copy_n(data + wire::kHelloFieldBytes, proof.size(), proof.begin());
        auto want = loom::crypto::prove({}, wire::kHelloDomain, nonce,
                                        std::span(data, wire::kHelloFieldBytes));
        (void)loom::crypto::mac_equal(proof, want);
      }
      break;
    case 1:
      if (size >= wire::kRequestHeaderBytes) {
        auto h = wire::decode_request(data);
        auto why = wire::validate_request(h);
        if (why.empty() && (h.key_len == 0 || h.key_len > wire::kMaxKeyBytes)) __builtin_trap();
      }
      break;
    case 2:
      if (size >= wire::kResponseHeaderBytes) (void)wire::decode_response(data);
      break;
    case 3: (void)loom::bootstrap::parse_counter(std::span(data, size), "k"); break;
    case 4: {
      auto r = loom::detail::decode_failure(text, 8);
      if (r && (r->rank < 0 || r->rank >= 8 || r->reporter < 0 || r->reporter >= 8))
        __builtin_trap();
      break;
    }
    default: {
      auto p = loom::detail::decode_progress(text);
      if (p) (void)loom::detail::encode_progress(*p);
      break;
    }
  }
  return 0;
}
