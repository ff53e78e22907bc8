#include "proto/header_value.hpp"
#include "proto/target_policy.hpp"

#include <gtest/gtest.h>

#include <string>

namespace surge::proto {
namespace {

using namespace std::string_literals;

TEST(header_value, visible_ascii_space_and_tab_pass) {
  EXPECT_EQ(header_value_problem("video.trending"), "");
  EXPECT_EQ(header_value_problem(""), "");
  EXPECT_EQ(header_value_problem("a b\tc ~!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}"), "");
  EXPECT_TRUE(is_safe_header_value("Surge/0.1 (+webhook spike drainer)"));
}

TEST(header_value, cr_lf_and_controls_are_refused) {
  EXPECT_EQ(header_value_problem("video.x\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"),
            "contains CR/LF");
  EXPECT_EQ(header_value_problem("a\rb"), "contains CR/LF");
  EXPECT_EQ(header_value_problem("a\nb"), "contains CR/LF");
  EXPECT_EQ(header_value_problem("a\0b"s), "contains NUL");
  EXPECT_EQ(header_value_problem("a\x01"), "contains a control character");
  EXPECT_EQ(header_value_problem("a\x1f"), "contains a control character");
  EXPECT_EQ(header_value_problem("a\x7f"), "contains a control character");
  EXPECT_EQ(header_value_problem("vid\xc3\xa9o"), "contains a non-ASCII byte");
  // CR/LF is named first, whatever else is wrong.
  EXPECT_EQ(header_value_problem("\x01\xff\0\n"s), "contains CR/LF");
}

// Long values are checked many bytes at a time first: a single bad byte anywhere, including
// the tail past the last whole block, must still be found and named.
TEST(header_value, one_bad_byte_anywhere_in_a_long_value_is_found) {
  for (const std::size_t at : {0u, 1u, 15u, 16u, 31u, 32u, 63u, 64u, 98u, 99u}) {
    for (int b = 0; b < 256; ++b) {
      std::string value(100, 'a');
      value[at] = static_cast<char>(b);
      const bool fine = (b >= 0x20 && b < 0x7f) || b == '\t';
      EXPECT_EQ(header_value_problem(value).empty(), fine) << "byte " << b << " at " << at;
    }
  }
}

TEST(header_value, request_targets_hold_no_space) {
  EXPECT_EQ(request_target_problem("/hooks/in?x=1&y=%20"), "");
  EXPECT_EQ(request_target_problem("/a b"), "contains a space or tab");
  EXPECT_EQ(request_target_problem("/a\tb"), "contains a space or tab");
  EXPECT_EQ(request_target_problem("/a\r\nHost: x"), "contains CR/LF");
  EXPECT_EQ(request_target_problem("a"), "does not start with '/'");
  EXPECT_EQ(request_target_problem(""), "does not start with '/'");
}

// Whatever parse_target_url accepts is safe on the request line and in the Host header: raw
// controls and spaces are refused, percent-encoded ones stay encoded.
TEST(header_value, target_urls_never_carry_controls) {
  for (const std::string& url :
       {"http://h.example/x\r\nHost: evil"s, "http://h.example/x y"s, "http://h.example/?q=\nx"s,
        "http://h.example\r\n/"s, "http://h.example:80\r\n/"s, "http://h.example/\0x"s,
        "http://h.example/a\tb"s, "http://h.example/\x7f"s, "http://h\r\nx.example/"s,
        "http://h.example/?\xc3\xa9"s, "http://[::1\r\n]/"s}) {
    const auto parsed = parse_target_url(url);
    EXPECT_FALSE(parsed.value) << url << " gave path " << parsed.value->path;
  }
  const auto encoded = parse_target_url("http://h.example/a%0d%0ab?q=%0A%20 ");
  ASSERT_TRUE(encoded.value) << encoded.error;
  EXPECT_EQ(encoded.value->path, "/a%0d%0ab?q=%0A%20");
  EXPECT_EQ(request_target_problem(encoded.value->path), "");
  EXPECT_EQ(header_value_problem(encoded.value->host_header), "");
}

}  // namespace
}  // namespace surge::proto
