// Wire format of the TCP store (shared by tcp_store_server.cpp and tcp_store_client.cpp).
// Every integer is little-endian.
//
//   challenge server -> client magic u32 | version u16 | reserved u16 (0) | nonce [16]
//   hello    client -> server  magic u32 | version u16 | reserved u16 (0) | comm_id u64 | rank i32
//                              | pid u32 | host [64] (NUL-padded hostname)
//                              | proof [32] = crypto::prove(secret, kHelloDomain, nonce, the
//                              first 88 bytes); checked before anything else is trusted
//                              | client nonce [16]
//   ack      server -> client  magic u32 | version u16 | AckStatus u16, and after an Ok ack
//                              proof [32] = crypto::prove(secret, kServerDomain, client nonce,
//                              the hello's first 88 bytes): the client checks it before it sends
//                              a request, so neither side talks to a process without the secret;
//                              after a DuplicateRank ack: length u16 | text (who holds the rank)
//   request  client -> server  Op u8 | key_len u32 | arg u64 | key | value (SET only)
//            arg: SET value length; GET wait in ms (0: don't wait, kWaitForever), with bit 63
//            (kEndsOnGone) set when a finite wait ends like such a GATHER's (below); ADD delta
//            (i64); GATHER (n << 32) | wait in ms (32 bits, 0xffffffff: forever), n >= 1 the
//            number of ranks, and bit 63 (kEndsOnGone): also answer Timeout, before the
//            wait ends, when a client vanished that this connection was not told of by such a
//            gather yet (its caller then checks who died); WATCH wait in ms (as GET); ERASE, GONE,
//            BYE: 0. GATHER waits until the keys `key`/0 .. `key`/(n-1) all exist (a rank publishes
//            with SET, then gathers). WATCH's key is a list of keys joined by '\n': it waits until
//            one of them exists. ERASE removes every key that starts with `key`; GONE (key "-")
//            lists the clients that vanished without a BYE; BYE (key "-") says this client closes
//            cleanly and gets no answer.
//   response server -> client  Reply u8 | arg u64 | payload
//            Ok: GET value (arg = length), SET nothing, ADD new value in arg (i64), ERASE the
//            number of keys removed in arg, GONE a text payload (arg = length), one line per
//            client: "rank pid host"; GATHER (arg = length) n records of u32 length | value, in
//            rank order; WATCH the index of the first key that exists in arg
//            Timeout (GET, GATHER, WATCH only): GET, WATCH nothing; GATHER the missing ranks as
//            text ("0-3,7"; arg = length); Error: message (arg = length) Closing (unsolicited, arg
//            = length of an optional reason text that follows): the server is shutting down cleanly
//            (its owner finalized); it replaces the answer to any pending request and is the last
//            frame. A connection that ends without it means the server's process died.
//
// A client sends one request and waits for its response (no pipelining is needed, though the
// server answers pipelined requests in order). The server enforces GET timeouts itself, so a
// timed-out GET leaves the connection in sync.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace loom::bootstrap::wire {

constexpr std::uint32_t kMagic = 0x4C4D5354;  // "LMST"
// 2: authenticated hello; 3: Closing; 4: mutual proof; 5: pid and host in the hello, duplicate
// ranks refused, ERASE, GONE, BYE; 6: GATHER, WATCH and the gone keys; 7: gathers that end when
// a client vanishes.
constexpr std::uint16_t kVersion = 7;
// The server sets kGoneKey + "N" (N = 1, 2, ...: "rank pid host") when the N-th client vanishes
// without a goodbye, so ranks can WATCH for deaths instead of polling GONE.
constexpr const char* kGoneKey = "!gone/";
constexpr std::size_t kChallengeBytes = 24;
constexpr std::size_t kHostBytes = 64;
constexpr std::size_t kHelloFieldBytes = 24 + kHostBytes;
constexpr std::size_t kHelloBytes = kHelloFieldBytes + 32 + 16;
constexpr const char* kHelloDomain = "loom-store-hello-v2";
constexpr const char* kServerDomain = "loom-store-server-v1";
constexpr std::size_t kServerProofBytes = 32;
constexpr std::size_t kAckBytes = 8;
constexpr std::size_t kRequestHeaderBytes = 13;
constexpr std::size_t kResponseHeaderBytes = 9;
constexpr std::size_t kMaxKeyBytes = 4096;
constexpr std::size_t kMaxValueBytes = std::size_t{64} << 20;
constexpr std::size_t kMaxErrorBytes = 4096;
constexpr std::size_t kMaxGoneBytes = std::size_t{1} << 20;
constexpr std::size_t kMaxRefusalBytes = 1024;
constexpr std::uint64_t kWaitForever = ~std::uint64_t{0};
constexpr std::size_t kMaxGatherBytes = std::size_t{1} << 31;
constexpr std::uint32_t kGatherForever = ~std::uint32_t{0};
constexpr int kMaxGatherRanks = 1 << 24;

constexpr std::uint64_t kEndsOnGone = std::uint64_t{1} << 63;

/// A GET's arg: waiting `wait_ms` (kWaitForever: forever), ended early by a vanished client when
/// `ends_on_gone` (finite waits only).
inline std::uint64_t get_arg(std::uint64_t wait_ms, bool ends_on_gone) {
  if (wait_ms == kWaitForever) return wait_ms;
  return std::min(wait_ms, kEndsOnGone - 1) | (ends_on_gone ? kEndsOnGone : 0);
}
inline bool get_ends_on_gone(std::uint64_t arg) {
  return arg != kWaitForever && (arg & kEndsOnGone) != 0;
}
inline std::uint64_t get_wait_ms(std::uint64_t arg) {
  return arg == kWaitForever ? arg : arg & ~kEndsOnGone;
}

/// A GATHER's arg: `n` ranks, waiting `wait_ms` (kGatherForever: forever), ended early by a
/// vanished client when `ends_on_gone`.
inline std::uint64_t gather_arg(int n, std::uint64_t wait_ms, bool ends_on_gone = false) {
  const std::uint64_t wait = wait_ms >= kGatherForever ? kGatherForever : wait_ms;
  return (static_cast<std::uint64_t>(n) << 32) | wait | (ends_on_gone ? kEndsOnGone : 0);
}
inline int gather_ranks(std::uint64_t arg) {
  return static_cast<int>((arg & ~kEndsOnGone) >> 32);
}
inline bool gather_ends_on_gone(std::uint64_t arg) {
  return (arg & kEndsOnGone) != 0;
}
inline std::uint32_t gather_wait_ms(std::uint64_t arg) {
  return static_cast<std::uint32_t>(arg);
}

enum class AckStatus : std::uint16_t { Ok = 0, WrongCommId = 1, BadVersion = 2, DuplicateRank = 3 };
enum class Op : std::uint8_t {
  Set = 1,
  Get = 2,
  Add = 3,
  Erase = 4,
  Gone = 5,
  Bye = 6,
  Gather = 7,
  Watch = 8,
};
enum class Reply : std::uint8_t { Ok = 0, Timeout = 1, Error = 2, Closing = 3 };

inline void put_u16(std::uint8_t* p, std::uint16_t v) {
  for (int i = 0; i < 2; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
inline void put_u32(std::uint8_t* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
inline void put_u64(std::uint8_t* p, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
inline std::uint16_t get_u16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>(p[0] | (p[1] << 8));
}
inline std::uint32_t get_u32(const std::uint8_t* p) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
inline std::uint64_t get_u64(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

struct Hello {
  std::uint32_t magic = kMagic;
  std::uint16_t version = kVersion;
  std::uint16_t reserved = 0;
  std::uint64_t comm_id = 0;
  std::int32_t rank = 0;
  std::uint32_t pid = 0;
  std::string host;  // at most kHostBytes - 1 bytes travel
};

/// The hello's fields (the proof follows them on the wire).
inline std::array<std::uint8_t, kHelloFieldBytes> encode_hello(const Hello& h) {
  std::array<std::uint8_t, kHelloFieldBytes> b{};
  put_u32(&b[0], h.magic);
  put_u16(&b[4], h.version);
  put_u16(&b[6], h.reserved);
  put_u64(&b[8], h.comm_id);
  put_u32(&b[16], static_cast<std::uint32_t>(h.rank));
  put_u32(&b[20], h.pid);
  std::copy_n(h.host.begin(), std::min(h.host.size(), kHostBytes - 1), b.begin() + 24);
  return b;
}

/// Decodes the fields; the host stops at the first NUL or non-printable byte.
inline Hello decode_hello(const std::uint8_t* p) {
  Hello h{get_u32(p),
          get_u16(p + 4),
          get_u16(p + 6),
          get_u64(p + 8),
          static_cast<std::int32_t>(get_u32(p + 16)),
          get_u32(p + 20),
          {}};
  for (std::size_t i = 0; i < kHostBytes && p[24 + i] > ' ' && p[24 + i] < 0x7f; ++i)
    h.host.push_back(static_cast<char>(p[24 + i]));
  return h;
}

inline std::array<std::uint8_t, kAckBytes> encode_ack(AckStatus s) {
  std::array<std::uint8_t, kAckBytes> b{};
  put_u32(&b[0], kMagic);
  put_u16(&b[4], kVersion);
  put_u16(&b[6], static_cast<std::uint16_t>(s));
  return b;
}

inline std::array<std::uint8_t, kChallengeBytes> encode_challenge(
    const std::array<std::uint8_t, 16>& nonce) {
  std::array<std::uint8_t, kChallengeBytes> b{};
  put_u32(&b[0], kMagic);
  put_u16(&b[4], kVersion);
  for (std::size_t i = 0; i < nonce.size(); ++i) b[8 + i] = nonce[i];
  return b;
}

struct RequestHeader {
  std::uint8_t op = 0;
  std::uint32_t key_len = 0;
  std::uint64_t arg = 0;
};

inline std::array<std::uint8_t, kRequestHeaderBytes> encode_request(const RequestHeader& h) {
  std::array<std::uint8_t, kRequestHeaderBytes> b{};
  b[0] = h.op;
  put_u32(&b[1], h.key_len);
  put_u64(&b[5], h.arg);
  return b;
}

inline RequestHeader decode_request(const std::uint8_t* p) {
  return {p[0], get_u32(p + 1), get_u64(p + 5)};
}

/// Why `h` is invalid ("" when valid). Checked before the key and value are read.
inline std::string_view validate_request(const RequestHeader& h) {
  if (h.op < static_cast<std::uint8_t>(Op::Set) || h.op > static_cast<std::uint8_t>(Op::Watch)) {
    return "unknown opcode";
  }
  if (h.key_len == 0 || h.key_len > kMaxKeyBytes) return "key length out of range";
  if (h.op == static_cast<std::uint8_t>(Op::Set) && h.arg > kMaxValueBytes) {
    return "value length out of range";
  }
  if (h.op == static_cast<std::uint8_t>(Op::Gather) &&
      (gather_ranks(h.arg) < 1 || gather_ranks(h.arg) > kMaxGatherRanks)) {
    return "gather rank count out of range";
  }
  return "";
}

struct ResponseHeader {
  std::uint8_t reply = 0;
  std::uint64_t arg = 0;
};

inline std::array<std::uint8_t, kResponseHeaderBytes> encode_response(Reply r, std::uint64_t arg) {
  std::array<std::uint8_t, kResponseHeaderBytes> b{};
  b[0] = static_cast<std::uint8_t>(r);
  put_u64(&b[1], arg);
  return b;
}

inline ResponseHeader decode_response(const std::uint8_t* p) {
  return {p[0], get_u64(p + 1)};
}

}  // namespace loom::bootstrap::wire
