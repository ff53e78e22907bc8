#include "proto/extra_headers.hpp"

#include <gtest/gtest.h>

#include <string>

namespace surge::proto {
namespace {

using namespace std::string_literals;

TEST(extra_headers, partner_credentials_pass) {
  EXPECT_EQ(extra_header_problem({"Authorization", "Bearer x"}), "");
  EXPECT_EQ(extra_header_problem({"X-Api-Key", "k-123"}), "");
  EXPECT_EQ(extra_header_problem({"x-partner-tenant", ""}), "");
}

TEST(extra_headers, surge_own_and_framing_names_are_refused_in_any_case) {
  for (const char* name : {"Host",
                           "host",
                           "HOST",
                           "User-Agent",
                           "Content-Type",
                           "content-length",
                           "Transfer-Encoding",
                           "Connection",
                           "Keep-Alive",
                           "TE",
                           "Trailer",
                           "Upgrade",
                           "Expect",
                           "Proxy-Connection",
                           "X-VVV-Signature",
                           "x-vvv-timestamp",
                           "X-VVV-Event",
                           "X-VVV-Delivery-Id",
                           "X-VVV-Delivery-Ids",
                           "X-VVV-Subscriber",
                           "X-VVV-Attempt",
                           "X-VVV-Batch-Size",
                           "X-Vvv-Anything-New",
                           "webhook-id",
                           "Webhook-Timestamp",
                           "webhook-signature"}) {
    EXPECT_NE(extra_header_name_problem(name), "") << name;
    EXPECT_NE(extra_header_problem({name, "x"}), "") << name;
  }
}

// A partner verifies the signature over the body it reads: nothing may tell it to decode the
// body differently, or offer it another digest or signature to check instead.
TEST(extra_headers, content_fields_and_body_integrity_names_are_refused_in_any_case) {
  for (const char* name :
       {"Content-Encoding", "content-encoding", "CONTENT-ENCODING", "Content-Language",
        "Content-Range", "Content-Location", "Content-Disposition", "Content-MD5", "Content-Digest",
        "content-x-anything", "Digest", "digest", "Repr-Digest", "REPR-DIGEST", "Signature",
        "signature", "Signature-Input", "signature-INPUT"}) {
    EXPECT_NE(extra_header_name_problem(name), "") << name;
    EXPECT_NE(extra_header_problem({name, "gzip"}), "") << name;
  }
  // Only the whole prefix or the exact names: near misses are a partner's own headers.
  for (const char* name : {"X-Content-Id", "Contents", "Content", "X-Signature-Key", "Digests",
                           "X-Digest", "Signatures"}) {
    EXPECT_EQ(extra_header_name_problem(name), "") << name;
  }
}

TEST(extra_headers, names_must_be_tokens) {
  EXPECT_NE(extra_header_name_problem(""), "");
  EXPECT_NE(extra_header_name_problem("Bad Name"), "");
  EXPECT_NE(extra_header_name_problem("Bad:Name"), "");
  EXPECT_NE(extra_header_name_problem("X-A\r\nHost"), "");
  EXPECT_NE(extra_header_name_problem("Caf\xc3\xa9"), "");
  EXPECT_EQ(extra_header_name_problem("X-Ok_1.2~"), "");
}

TEST(extra_headers, unsafe_values_are_refused_by_the_header_value_rule) {
  EXPECT_EQ(extra_header_problem({"Authorization", "Bearer x\r\nHost: evil"}),
            "header 'Authorization': the value contains CR/LF");
  EXPECT_EQ(extra_header_problem({"X-Key", "a\0b"s}), "header 'X-Key': the value contains NUL");
  EXPECT_EQ(extra_header_problem({"X-Key", "a\x01"}),
            "header 'X-Key': the value contains a control character");
  EXPECT_EQ(extra_header_problem({"X-Key", "\xc3\xa9"}),
            "header 'X-Key': the value contains a non-ASCII byte");
}

TEST(extra_headers, a_value_longer_than_partners_accept_is_refused_when_set) {
  EXPECT_EQ(extra_header_problem({"Authorization", std::string(max_extra_header_value_bytes, 'a')}),
            "");
  const auto problem = extra_header_problem({"Authorization", std::string(64 * 1024 + 1, 'a')});
  EXPECT_NE(problem.find("header 'Authorization': the value is 65537 bytes"), std::string::npos)
      << problem;
  std::string error;
  parse_header_line("X-Key: " + std::string(max_extra_header_value_bytes + 1, 'k'), &error);
  EXPECT_NE(error.find("at most 8192"), std::string::npos) << error;
}

TEST(extra_headers, command_line_form_is_parsed_and_checked) {
  std::string error;
  auto field = parse_header_line("Authorization:   Bearer x  ", &error);
  EXPECT_EQ(error, "");
  EXPECT_EQ(field, (header_field{"Authorization", "Bearer x"}));
  parse_header_line("no colon", &error);
  EXPECT_EQ(error, "expected 'Name: value'");
  parse_header_line("Host: evil.example", &error);
  EXPECT_NE(error.find("header 'Host'"), std::string::npos) << error;
}

TEST(extra_headers, stored_form_round_trips) {
  const std::vector<header_field> fields = {
      {"Authorization", "Bearer a: b"}, {"X-Key", ""}, {"X-Other", " lead"}};
  EXPECT_EQ(decode_header_fields(encode_header_fields(fields)), fields);
  EXPECT_TRUE(decode_header_fields("").empty());
  // What another program may have written is kept, so the drain can name the problem.
  const auto odd = decode_header_fields("garbage\nX-A: 1\r");
  ASSERT_EQ(odd.size(), 2u);
  EXPECT_NE(extra_header_problem(odd[0]), "");
  EXPECT_NE(extra_header_problem(odd[1]), "");
}

}  // namespace
}  // namespace surge::proto
