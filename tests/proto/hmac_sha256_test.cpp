#include "proto/hmac_sha256.hpp"

#include <gtest/gtest.h>

#include <string>

#include "proto/signing.hpp"

namespace surge::proto {
namespace {

std::string hex(const sha256_digest& digest) { return to_lower_hex(digest); }

// RFC 4231 test case 4: a 25-byte key, a 50-byte message.
const std::string case_4_key = [] {
  std::string key;
  for (int i = 1; i <= 25; ++i) key.push_back(static_cast<char>(i));
  return key;
}();
const std::string case_4_data(50, '\xcd');
constexpr const char* case_4_mac =
    "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b";

TEST(hmac_sha256_key, rfc4231_case_4) {
  EXPECT_EQ(hex(hmac_sha256_key(case_4_key).mac({case_4_data})), case_4_mac);
}

TEST(hmac_sha256_key, parts_are_hashed_as_one_message_wherever_they_are_cut) {
  const hmac_sha256_key key(case_4_key);
  for (std::size_t cut = 0; cut <= case_4_data.size(); cut += 7) {
    const std::string_view data(case_4_data);
    EXPECT_EQ(hex(key.mac({data.substr(0, cut), "", data.substr(cut)})), case_4_mac) << cut;
  }
}

TEST(hmac_sha256_key, one_key_signs_many_messages_and_its_copies_agree) {
  const hmac_sha256_key key("surge-test-secret");
  const hmac_sha256_key copy = key;
  const auto first = key.mac({"1700000000", ".", "{}"});
  EXPECT_NE(key.mac({"1700000001", ".", "{}"}), first);
  EXPECT_EQ(key.mac({"1700000000", ".", "{}"}), first);
  EXPECT_EQ(copy.mac({"1700000000", ".", "{}"}), first);
  EXPECT_EQ(first, hmac_sha256("surge-test-secret", "1700000000.{}"));
}

}  // namespace
}  // namespace surge::proto
