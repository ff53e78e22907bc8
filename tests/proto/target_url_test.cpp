#include "proto/target_policy.hpp"

#include <gtest/gtest.h>

namespace surge::proto {
namespace {

target parsed(std::string_view url) {
  const target_parse p = parse_target_url(url);
  EXPECT_TRUE(p.value.has_value()) << url << ": " << p.error;
  EXPECT_TRUE(!p.value || p.error.empty());
  return p.value.value_or(target{});
}

std::string error_of(std::string_view url) {
  const target_parse p = parse_target_url(url);
  EXPECT_FALSE(p.value.has_value()) << url;
  EXPECT_FALSE(p.error.empty()) << url;
  return p.error;
}

TEST(target_url, https_defaults) {
  const target t = parsed("https://hooks.example.com");
  EXPECT_TRUE(t.tls);
  EXPECT_EQ(t.host, "hooks.example.com");
  EXPECT_EQ(t.port, 443);
  EXPECT_EQ(t.path, "/");
  EXPECT_EQ(t.host_header, "hooks.example.com");
  EXPECT_EQ(t.origin_key, "https://hooks.example.com:443");
}

TEST(target_url, http_with_port_path_and_query) {
  const target t = parsed("http://Hooks.Example.COM:8080/in/v1?token=a%20b&x=1#frag");
  EXPECT_FALSE(t.tls);
  EXPECT_EQ(t.host, "hooks.example.com");
  EXPECT_EQ(t.port, 8080);
  EXPECT_EQ(t.path, "/in/v1?token=a%20b&x=1");
  EXPECT_EQ(t.host_header, "hooks.example.com:8080");
  EXPECT_EQ(t.origin_key, "http://hooks.example.com:8080");
}

TEST(target_url, scheme_is_case_insensitive) {
  const target t = parsed("HTTPS://example.com/");
  EXPECT_TRUE(t.tls);
  EXPECT_EQ(t.origin_key, "https://example.com:443");
  EXPECT_FALSE(parsed("Http://example.com").tls);
}

TEST(target_url, default_ports_are_not_in_the_host_header) {
  EXPECT_EQ(parsed("http://example.com:80/").host_header, "example.com");
  EXPECT_EQ(parsed("https://example.com:443/").host_header, "example.com");
  EXPECT_EQ(parsed("https://example.com:80/").host_header, "example.com:80");
  EXPECT_EQ(parsed("http://example.com:443/").host_header, "example.com:443");
  EXPECT_EQ(parsed("http://example.com:/").port, 80);  // empty port means the default
  EXPECT_EQ(parsed("http://example.com:00080/").port, 80);
  EXPECT_EQ(parsed("http://example.com:1/").port, 1);
  EXPECT_EQ(parsed("http://example.com:65535/").port, 65535);
}

TEST(target_url, query_without_path_and_empty_query) {
  EXPECT_EQ(parsed("https://example.com?a=1").path, "/?a=1");
  EXPECT_EQ(parsed("https://example.com/?").path, "/?");
  EXPECT_EQ(parsed("https://example.com#only-fragment").path, "/");
  EXPECT_EQ(parsed("https://example.com/a/../b/%7Euser").path, "/a/../b/%7Euser");
}

TEST(target_url, ip_literals) {
  const target v4 = parsed("http://127.0.0.1:9000/hook");
  EXPECT_EQ(v4.host, "127.0.0.1");
  EXPECT_EQ(v4.host_header, "127.0.0.1:9000");
  EXPECT_EQ(v4.origin_key, "http://127.0.0.1:9000");

  const target v6 = parsed("https://[2606:4700:0:0::1111]/x");
  EXPECT_EQ(v6.host, "2606:4700::1111");
  EXPECT_EQ(v6.host_header, "[2606:4700::1111]");
  EXPECT_EQ(v6.origin_key, "https://[2606:4700::1111]:443");

  const target v6_port = parsed("http://[::1]:8080");
  EXPECT_EQ(v6_port.host, "::1");
  EXPECT_EQ(v6_port.host_header, "[::1]:8080");
  EXPECT_EQ(v6_port.path, "/");
  EXPECT_EQ(parsed("http://[FE80::ABCD]/").host, "fe80::abcd");
}

TEST(target_url, surrounding_whitespace_is_ignored) {
  EXPECT_EQ(parsed("  https://example.com/x\n").path, "/x");
}

TEST(target_url, errors) {
  EXPECT_EQ(error_of("ftp://example.com/"),
            "is not an http:// or https:// URL (its scheme is 'ftp')");
  EXPECT_EQ(error_of("ws://example.com/"),
            "is not an http:// or https:// URL (its scheme is 'ws')");
  EXPECT_EQ(error_of("file:///etc/passwd"),
            "is not an http:// or https:// URL (its scheme is 'file')");
  EXPECT_EQ(error_of("https://user:pass@example.com/"),
            "has user info (user:password@ before the host)");
  EXPECT_EQ(error_of("https://user@example.com/"),
            "has user info (user:password@ before the host)");
  EXPECT_EQ(error_of("https://@example.com/"), "has user info (user:password@ before the host)");
  EXPECT_EQ(error_of("https:///path"), "has no host");
  EXPECT_EQ(error_of("https:path"), "does not start with https://");
  EXPECT_EQ(error_of("http:/x"), "does not start with http://");
  EXPECT_EQ(error_of("http://"), "has no host");
  EXPECT_EQ(error_of("http://example.com:0/"), "has an invalid port '0' (1-65535)");
  EXPECT_EQ(error_of("http://example.com:65536/"), "has an invalid port '65536' (1-65535)");
  EXPECT_EQ(error_of("http://example.com:99999999999999999999/"),
            "has an invalid port '99999999999999999999' (1-65535)");
  EXPECT_EQ(error_of("http://exa%20mple.com/"), "has an invalid host name 'exa mple.com'");
  EXPECT_EQ(error_of("http://[v1.fe]/"), "has an unsupported IP literal '[v1.fe]'");
  // What Boost.URL refuses is named by the part that is wrong, not by its error names.
  EXPECT_EQ(error_of("htp:/x"), "is not an http:// or https:// URL (its scheme is 'htp')");
  EXPECT_EQ(error_of("htp//x"), "is not an http:// or https:// URL");
  EXPECT_EQ(error_of("not a url"), "is not an http:// or https:// URL");
  EXPECT_EQ(error_of(""), "is not an http:// or https:// URL");
  EXPECT_EQ(error_of("//example.com/"), "is not an http:// or https:// URL");
  EXPECT_EQ(error_of("https://exa mple.com/"), "has a character not allowed in a host name (' ')");
  EXPECT_EQ(error_of("https://[::1/"), "has an IPv6 address without its closing ']'");
  EXPECT_EQ(error_of("http://example.com:80abc/"), "has characters after the port");
  EXPECT_EQ(error_of("http://example.com:abc/"), "has a port that is not a number");
  EXPECT_EQ(error_of("http://example.com/a b"),
            "has a character not allowed in a URL at position 21 (escape it as %XX)");
  EXPECT_EQ(error_of("http://example.com/100%"),
            "has a '%' at position 23 that is not a %XX escape");
  EXPECT_EQ(error_of("example.com:8080"),
            "is not an http:// or https:// URL (its scheme is 'example.com')");
}

TEST(target_url, numeric_names_that_resolvers_read_as_ipv4_are_refused) {
  for (std::string_view url : {"http://2130706433/", "http://127.1/", "http://0x7f.1/",
                               "http://0177.0.0.1/", "http://01.2.3.4/", "http://example.0x10/"}) {
    EXPECT_NE(error_of(url).find("numeric host"), std::string::npos) << url;
  }
  EXPECT_EQ(parsed("http://1password.com/").host, "1password.com");
  EXPECT_EQ(parsed("http://example.com./").host, "example.com.");
  EXPECT_EQ(parsed("http://x.0xg/").host, "x.0xg");
}

// Boost.URL 1.81 splits these into an IPv4 host and a path that does not start with '/'.
TEST(target_url, names_beginning_with_an_ipv4_address_are_refused) {
  EXPECT_EQ(
      error_of("http://1.2.3.4.evil.example/x"),
      "has an unsupported host '1.2.3.4.evil.example': a name may not begin with an IPv4 address");
  EXPECT_EQ(
      error_of("http://127.0.0.1.nip.io:8080/"),
      "has an unsupported host '127.0.0.1.nip.io': a name may not begin with an IPv4 address");
  for (std::string_view url : {"http://1.2.3.4.5/", "http://127.0.0.1./", "http://1.2.3.4x/",
                               "http://1.2.3.4.evil.example"}) {
    EXPECT_NE(error_of(url).find("may not begin with an IPv4"), std::string::npos) << url;
  }
  EXPECT_EQ(parsed("http://1.2.3.4:8080").host, "1.2.3.4");
  EXPECT_EQ(parsed("http://1.2.3.4?q").path, "/?q");
  EXPECT_EQ(parsed("http://1.2.3.4#f").path, "/");
}

TEST(TargetUrl, RedactHidesUserInfoQueryValuesAndFragment) {
  EXPECT_EQ(redact_url("https://user:pass@hooks.example.com:8443/in/v1?token=abc&x=1#frag"),
            "https://***@hooks.example.com:8443/in/v1?token=***&x=***#***");
  EXPECT_EQ(redact_url("http://hooks.example.com/in"), "http://hooks.example.com/in");
  EXPECT_EQ(redact_url("http://h/p?s3cr3t"), "http://h/p?***");
  EXPECT_EQ(redact_url("http://h?token=a"), "http://h?token=***");
  EXPECT_EQ(redact_url("http://a:b@h"), "http://***@h");
  // The last '@' ends the user info, as parsers read it.
  EXPECT_EQ(redact_url("http://a@b:c@h/x"), "http://***@h/x");
  // Text that is no URL at all still loses what looks like a secret.
  EXPECT_EQ(redact_url("not a url?key=v"), "not a url?key=***");
  EXPECT_EQ(redact_url(""), "");
}

TEST(ProxyUrl, AnHttpUrlWithAHostAndAPortOnly) {
  const auto parsed = parse_proxy_url("http://Egress.Example:3128");
  ASSERT_TRUE(parsed.value) << parsed.error;
  EXPECT_EQ(parsed.value->host, "egress.example");
  EXPECT_EQ(parsed.value->port, 3128);
  EXPECT_EQ(parse_proxy_url("http://[fd00::1]:8080").value->host, "fd00::1");
  EXPECT_EQ(parse_proxy_url("http://egress").value->port, 80);
  EXPECT_NE(parse_proxy_url("https://egress:3128").error.find("TLS to the proxy"),
            std::string::npos);
  EXPECT_EQ(parse_proxy_url("http://egress:3128/path").error, "has a path (a proxy URL has none)");
  EXPECT_FALSE(parse_proxy_url("http://user:pw@egress:3128").value);
  EXPECT_FALSE(parse_proxy_url("egress:3128").value);
}

}  // namespace
}  // namespace surge::proto
