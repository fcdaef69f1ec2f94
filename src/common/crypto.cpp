#include "common/crypto.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <vector>

#include "common/diag.hpp"

namespace loom::crypto {

Status random_bytes(std::span<std::uint8_t> out) {
  if (RAND_bytes(out.data(), static_cast<int>(out.size())) != 1)
    return {ErrorCode::SystemError, "RAND_bytes failed"};
  return Status::ok();
}

Nonce make_nonce() {
  Nonce n{};
  if (Status st = random_bytes(n); !st.is_ok()) diag::emit(diag::Level::Error, st.message());
  return n;
}

Mac prove(const Secret& secret, std::string_view domain, const Nonce& nonce,
          std::span<const std::uint8_t> message) {
  Mac mac{};
  std::vector<std::uint8_t> data;
  data.reserve(domain.size() + 1 + nonce.size() + message.size());
  data.insert(data.end(), domain.begin(), domain.end());
  data.push_back(0);
  data.insert(data.end(), nonce.begin(), nonce.end());
  data.insert(data.end(), message.begin(), message.end());
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), data.data(), data.size(),
           mac.data(), &len) == nullptr ||
      len != mac.size()) {
    diag::emit(diag::Level::Error, "HMAC-SHA256 failed");
    mac.fill(0);
  }
  return mac;
}

bool mac_equal(const Mac& a, const Mac& b) {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace loom::crypto
