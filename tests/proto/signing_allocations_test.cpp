// Signing allocates nothing from OpenSSL once the signer is made: the drain signs every request
// on its hot path. Its own binary, because OpenSSL takes allocation hooks only before its first
// allocation in the process.
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "proto/signing.hpp"

namespace {

std::atomic<long> openssl_allocations{0};

void* counting_malloc(std::size_t size, const char*, int) {
  openssl_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(size);
}
void* counting_realloc(void* block, std::size_t size, const char*, int) {
  openssl_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::realloc(block, size);
}
void counting_free(void* block, const char*, int) { std::free(block); }

long sign_many(const surge::proto::signer& signer, const std::string& payload) {
  const long before = openssl_allocations.load();
  std::size_t total = 0;
  for (int i = 0; i < 100; ++i) {
    const auto fields = signer.sign("msg_" + std::to_string(i), 1700000000 + i, payload);
    total += fields.value(fields.size() - 1).size();
  }
  EXPECT_GT(total, 0u);
  return openssl_allocations.load() - before;
}

TEST(signing_allocations, the_counter_sees_openssl_allocate) {
  const long before = openssl_allocations.load();
  EVP_MD_CTX* context = EVP_MD_CTX_new();
  EVP_MD_CTX_free(context);
  EXPECT_GT(openssl_allocations.load(), before);
}

TEST(signing_allocations, signing_a_request_allocates_nothing_from_openssl) {
  using surge::proto::signer;
  using surge::proto::signing_scheme;
  const std::string payload(300, 'x');
  const auto vvv = signer::create(signing_scheme::vvv, "surge-test-secret");
  // Two rotated keys, and a key longer than SHA-256's block, which is hashed when keyed.
  const auto standard =
      signer::create(signing_scheme::standard,
                     "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw " + std::string("whsec_") +
                         surge::proto::base64_encode(std::vector<unsigned char>(80, 0x5a)));
  ASSERT_TRUE(vvv && standard);
  EXPECT_EQ(sign_many(*vvv, payload), 0);
  EXPECT_EQ(sign_many(*standard, payload), 0);
}

}  // namespace

int main(int argc, char** argv) {
  if (CRYPTO_set_mem_functions(counting_malloc, counting_realloc, counting_free) != 1) {
    std::fprintf(stderr, "OpenSSL allocated before main: cannot count its allocations\n");
    return 1;
  }
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
