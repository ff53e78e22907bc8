// OpenSSL 3.0 offers no way to hash without allocating through EVP: EVP_DigestInit_ex2 and
// EVP_MD_CTX_copy_ex allocate the provider's context every time, EVP_MAC five times per
// message. The SHA256_* functions do not; they are deprecated in 3.0 but built into Debian's
// library and run the same assembly. They also bypass providers, so an OpenSSL configured for
// FIPS does not cover these signatures (Surge configures no provider). Suppressing the
// deprecation must come before any OpenSSL header; the header refuses an OpenSSL built without
// them.
#define OPENSSL_SUPPRESS_DEPRECATED

#include "proto/hmac_sha256.hpp"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <stdexcept>

namespace surge::proto {

hmac_sha256_key::hmac_sha256_key(std::string_view key) {
  constexpr std::size_t block = SHA256_CBLOCK;
  bool ok = true;
  // A key longer than a block is replaced by its digest; a shorter one is padded with zeros.
  sha256_digest hashed_key{};
  if (key.size() > block) {
    SHA256_CTX ctx;
    ok = SHA256_Init(&ctx) == 1 && SHA256_Update(&ctx, key.data(), key.size()) == 1 &&
         SHA256_Final(hashed_key.data(), &ctx) == 1;
    OPENSSL_cleanse(&ctx, sizeof ctx);
    key = {reinterpret_cast<const char*>(hashed_key.data()), hashed_key.size()};
  }
  std::array<unsigned char, block> inner_pad{};
  std::array<unsigned char, block> outer_pad{};
  for (std::size_t i = 0; i < block; ++i) {
    const auto k = i < key.size() ? static_cast<unsigned char>(key[i]) : 0;
    inner_pad[i] = static_cast<unsigned char>(k ^ 0x36);
    outer_pad[i] = static_cast<unsigned char>(k ^ 0x5c);
  }
  ok = ok && SHA256_Init(&inner_) == 1 && SHA256_Update(&inner_, inner_pad.data(), block) == 1 &&
       SHA256_Init(&outer_) == 1 && SHA256_Update(&outer_, outer_pad.data(), block) == 1;
  OPENSSL_cleanse(inner_pad.data(), inner_pad.size());
  OPENSSL_cleanse(outer_pad.data(), outer_pad.size());
  OPENSSL_cleanse(hashed_key.data(), hashed_key.size());
  if (!ok) throw std::runtime_error("SHA-256 failed");
}

// The keyed states are as secret as the key.
hmac_sha256_key::~hmac_sha256_key() {
  OPENSSL_cleanse(&inner_, sizeof inner_);
  OPENSSL_cleanse(&outer_, sizeof outer_);
}

sha256_digest hmac_sha256_key::mac(std::initializer_list<std::string_view> parts) const {
  SHA256_CTX ctx = inner_;
  bool ok = true;
  for (std::string_view part : parts) ok = ok && SHA256_Update(&ctx, part.data(), part.size()) == 1;
  sha256_digest inner_digest{};
  ok = ok && SHA256_Final(inner_digest.data(), &ctx) == 1;
  ctx = outer_;
  sha256_digest out{};
  ok = ok && SHA256_Update(&ctx, inner_digest.data(), inner_digest.size()) == 1 &&
       SHA256_Final(out.data(), &ctx) == 1;
  if (!ok) throw std::runtime_error("HMAC-SHA256 failed");
  return out;
}

}  // namespace surge::proto
