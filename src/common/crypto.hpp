// Connection authentication: HMAC-SHA256 challenge-response over the job's 128-bit secret
// (OpenSSL's libcrypto, linked privately).
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "common/status.hpp"

namespace loom::crypto {

using Secret = std::array<std::uint8_t, 16>;
using Nonce = std::array<std::uint8_t, 16>;
using Mac = std::array<std::uint8_t, 32>;

/// Fills `out` from the system's cryptographic random generator.
Status random_bytes(std::span<std::uint8_t> out);
/// A fresh random nonce (all zero only if the generator failed, which is logged).
Nonce make_nonce();
/// HMAC-SHA256(secret, domain || nonce || message): proves knowledge of `secret` for this
/// challenge (`nonce`) and this message, for one protocol (`domain`, e.g. "loom-tcp-hello").
Mac prove(const Secret& secret, std::string_view domain, const Nonce& nonce,
          std::span<const std::uint8_t> message);
/// Constant-time comparison.
bool mac_equal(const Mac& a, const Mac& b);

}  // namespace loom::crypto
