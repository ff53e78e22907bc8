#pragma once
// HMAC-SHA256 (RFC 2104) over SHA-256 states keyed once per key, for signing every request
// without allocating (proto/signing builds the two schemes on this).
#include <openssl/sha.h>

#ifdef OPENSSL_NO_DEPRECATED_3_0
#error "proto/hmac_sha256 needs SHA256_CTX and SHA256_Init: this OpenSSL was built without them"
#endif

#include <array>
#include <initializer_list>
#include <string_view>

namespace surge::proto {

using sha256_digest = std::array<unsigned char, 32>;

class hmac_sha256_key {
 public:
  explicit hmac_sha256_key(std::string_view key);
  // Copies only: SHA256_CTX is plain data, and every copy is wiped when it goes.
  hmac_sha256_key(const hmac_sha256_key&) = default;
  hmac_sha256_key& operator=(const hmac_sha256_key&) = default;
  ~hmac_sha256_key();

  // The MAC of the parts written one after the other. Allocates nothing.
  sha256_digest mac(std::initializer_list<std::string_view> parts) const;

 private:
  SHA256_CTX inner_{};  // after the key XOR ipad
  SHA256_CTX outer_{};  // after the key XOR opad
};

}  // namespace surge::proto
