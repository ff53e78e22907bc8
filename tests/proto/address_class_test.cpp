#include "proto/target_policy.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace surge::proto {
namespace {

using ac = address_class;

struct row {
  std::string_view text;
  address_class expected;
};

void check(std::initializer_list<row> rows) {
  for (const row& r : rows) {
    const auto address = ip_address::parse(r.text);
    ASSERT_TRUE(address.has_value()) << r.text;
    EXPECT_EQ(to_string(classify_address(*address)), to_string(r.expected)) << r.text;
  }
}

TEST(ip_address, parses_strict_ipv4) {
  const auto a = ip_address::parse("192.168.1.254");
  ASSERT_TRUE(a.has_value());
  EXPECT_FALSE(a->v6);
  const std::array<std::uint8_t, 16> expected{192, 168, 1, 254};
  EXPECT_EQ(a->bytes, expected);
  EXPECT_EQ(ip_address::v4(192, 168, 1, 254).bytes, expected);
  EXPECT_FALSE(ip_address::v4(1, 2, 3, 4).v6);
  for (std::string_view bad :
       {"", "01.2.3.4", "1.2.3", "1.2.3.4.5", "256.1.1.1", "1.2.3.4 ", " 1.2.3.4", "0x7f.0.0.1",
        "1..2.3", "1.2.3.-4", "2130706433", "127.1", "a.b.c.d"}) {
    EXPECT_FALSE(ip_address::parse(bad).has_value()) << bad;
  }
}

TEST(ip_address, parses_ipv6) {
  const auto a = ip_address::parse("2001:db8::ff01");
  ASSERT_TRUE(a.has_value());
  EXPECT_TRUE(a->v6);
  const std::array<std::uint8_t, 16> expected{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0,    0,
                                              0,    0,    0,    0,    0, 0, 0xff, 0x01};
  EXPECT_EQ(a->bytes, expected);
  const auto mapped = ip_address::parse("::ffff:1.2.3.4");
  ASSERT_TRUE(mapped.has_value());
  EXPECT_EQ(mapped->bytes[10], 0xff);
  EXPECT_EQ(mapped->bytes[15], 4);
  for (std::string_view bad :
       {"[::1]", "::1%eth0", "::ffff:1.2.3", "1:2:3:4:5:6:7:8:9", ":::1", "2001:db8::g", "::1 "}) {
    EXPECT_FALSE(ip_address::parse(bad).has_value()) << bad;
  }
}

TEST(address_class, names_are_distinct_snake_case) {
  std::set<std::string_view> names;
  for (ac kind : {ac::public_routable, ac::unspecified, ac::loopback, ac::private_use,
                  ac::shared_cgnat, ac::link_local, ac::metadata, ac::multicast, ac::broadcast,
                  ac::reserved, ac::documentation, ac::unique_local}) {
    const std::string_view name = to_string(kind);
    EXPECT_EQ(name.find_first_not_of("abcdefghijklmnopqrstuvwxyz_"), std::string_view::npos);
    names.insert(name);
  }
  EXPECT_EQ(names.size(), 12u);
  EXPECT_EQ(to_string(ac::public_routable), "public_routable");
}

TEST(address_class, ipv4_public) {
  check({{"8.8.8.8", ac::public_routable},
         {"1.1.1.1", ac::public_routable},
         {"93.184.216.34", ac::public_routable},
         {"223.255.255.255", ac::public_routable}});
  EXPECT_TRUE(is_public(ip_address::v4(8, 8, 8, 8)));
  EXPECT_FALSE(is_public(ip_address::v4(127, 0, 0, 1)));
}

TEST(address_class, ipv4_ranges_at_their_edges) {
  check({
      {"0.0.0.0", ac::unspecified},
      {"0.255.255.255", ac::unspecified},
      {"1.0.0.0", ac::public_routable},

      {"9.255.255.255", ac::public_routable},
      {"10.0.0.0", ac::private_use},
      {"10.255.255.255", ac::private_use},
      {"11.0.0.0", ac::public_routable},

      {"100.63.255.255", ac::public_routable},
      {"100.64.0.0", ac::shared_cgnat},
      {"100.127.255.255", ac::shared_cgnat},
      {"100.128.0.0", ac::public_routable},

      {"126.255.255.255", ac::public_routable},
      {"127.0.0.0", ac::loopback},
      {"127.0.0.1", ac::loopback},
      {"127.255.255.255", ac::loopback},
      {"128.0.0.0", ac::public_routable},

      {"169.253.255.255", ac::public_routable},
      {"169.254.0.0", ac::link_local},
      {"169.254.255.255", ac::link_local},
      {"169.255.0.0", ac::public_routable},

      {"172.15.255.255", ac::public_routable},
      {"172.16.0.0", ac::private_use},
      {"172.31.255.255", ac::private_use},
      {"172.32.0.0", ac::public_routable},

      {"191.255.255.255", ac::public_routable},
      {"192.0.0.0", ac::reserved},
      {"192.0.0.255", ac::reserved},

      {"192.0.1.255", ac::public_routable},
      {"192.0.2.0", ac::documentation},
      {"192.0.2.255", ac::documentation},
      {"192.0.3.0", ac::public_routable},

      {"192.88.98.255", ac::public_routable},
      {"192.88.99.0", ac::reserved},
      {"192.88.99.255", ac::reserved},
      {"192.88.100.0", ac::public_routable},

      {"192.167.255.255", ac::public_routable},
      {"192.168.0.0", ac::private_use},
      {"192.168.255.255", ac::private_use},
      {"192.169.0.0", ac::public_routable},

      {"198.17.255.255", ac::public_routable},
      {"198.18.0.0", ac::reserved},
      {"198.19.255.255", ac::reserved},
      {"198.20.0.0", ac::public_routable},

      {"198.51.99.255", ac::public_routable},
      {"198.51.100.0", ac::documentation},
      {"198.51.100.255", ac::documentation},
      {"198.51.101.0", ac::public_routable},

      {"203.0.112.255", ac::public_routable},
      {"203.0.113.0", ac::documentation},
      {"203.0.113.255", ac::documentation},
      {"203.0.114.0", ac::public_routable},

      {"223.255.255.255", ac::public_routable},
      {"224.0.0.0", ac::multicast},
      {"239.255.255.255", ac::multicast},

      {"240.0.0.0", ac::reserved},
      {"255.255.255.254", ac::reserved},
      {"255.255.255.255", ac::broadcast},
  });
}

TEST(address_class, ipv4_metadata) {
  check({{"169.254.169.254", ac::metadata},
         {"169.254.169.253", ac::link_local},
         {"169.254.169.255", ac::link_local},
         {"169.254.170.2", ac::metadata},
         {"100.100.100.200", ac::metadata},
         {"100.100.100.199", ac::shared_cgnat},
         {"100.100.100.201", ac::shared_cgnat},
         {"192.0.0.192", ac::metadata},
         {"192.0.0.191", ac::reserved}});
}

TEST(address_class, ipv6_special_addresses) {
  check({{"::", ac::unspecified},
         {"::1", ac::loopback},
         {"2606:4700::1111", ac::public_routable},
         {"2001:4860:4860::8888", ac::public_routable}});
}

TEST(address_class, ipv4_mapped_and_compatible) {
  check({
      {"::ffff:0.0.0.0", ac::unspecified},
      {"::ffff:127.0.0.1", ac::loopback},
      {"::ffff:8.8.8.8", ac::public_routable},
      {"::ffff:10.0.0.1", ac::private_use},
      {"::ffff:169.254.169.254", ac::metadata},
      {"::ffff:255.255.255.255", ac::broadcast},
      {"::fffe:ffff:ffff", ac::reserved},
      {"::1:0:0:0", ac::reserved},
      // Compatible (::/96): the embedded address decides.
      {"::8.8.8.8", ac::public_routable},
      {"::127.0.0.1", ac::loopback},
      {"::0.0.0.2", ac::unspecified},
      {"::255.255.255.255", ac::broadcast},
      {"::1:0:0", ac::reserved},
  });
}

TEST(address_class, nat64) {
  check({
      {"64:ff9b::", ac::unspecified},
      {"64:ff9b::8.8.8.8", ac::public_routable},
      {"64:ff9b::a00:1", ac::private_use},
      {"64:ff9b::ffff:ffff", ac::broadcast},
      {"64:ff9a:ffff:ffff:ffff:ffff:ffff:ffff", ac::reserved},
      {"64:ff9b::1:0:0", ac::reserved},  // past the /96, before the /48
      {"64:ff9b:1::8.8.8.8", ac::public_routable},
      {"64:ff9b:1::127.0.0.1", ac::loopback},
      {"64:ff9b:1:ffff:ffff:ffff:7f00:1", ac::loopback},
      {"64:ff9b:1:ffff:ffff:ffff:808:808", ac::public_routable},
      {"64:ff9b:2::", ac::reserved},
      {"64:ff9b:0:ffff::", ac::reserved},
  });
}

TEST(address_class, six_to_four) {
  check({
      {"2002::", ac::unspecified},
      {"2002:808:808::", ac::public_routable},
      {"2002:808:808:ffff:ffff:ffff:ffff:ffff", ac::public_routable},
      {"2002:7f00:1::", ac::loopback},
      {"2002:a9fe:a9fe::1", ac::metadata},
      {"2002:c0a8:101::", ac::private_use},
      {"2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ac::broadcast},
      {"2001:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ac::public_routable},
      {"2003::", ac::public_routable},
  });
}

TEST(address_class, teredo_is_never_public) {
  check({
      // RFC 4380's example: client 192.0.2.45.
      {"2001:0:4136:e378:8000:63bf:3fff:fdd2", ac::documentation},
      {"2001:0:4136:e378:8000:63bf:80ff:fffe", ac::loopback},     // client 127.0.0.1
      {"2001:0:4136:e378:8000:63bf:f7f7:f7f7", ac::reserved},     // client 8.8.8.8
      {"2001::", ac::broadcast},                                  // client 255.255.255.255
      {"2001:0:ffff:ffff:ffff:ffff:ffff:ffff", ac::unspecified},  // client 0.0.0.0
      {"2001:1::", ac::reserved},
  });
  check({{"2001:0:4136:e378:8000:63bf:5601:5601", ac::metadata}});  // 169.254.169.254
}

TEST(address_class, ietf_protocol_assignments) {
  check({
      {"2001:1::1", ac::reserved},
      {"2001:1::2", ac::reserved},
      {"2001:2::", ac::reserved},
      {"2001:2:0:ffff:ffff:ffff:ffff:ffff", ac::reserved},
      {"2001:2:1::", ac::reserved},
      {"2001:10::", ac::reserved},
      {"2001:1f:ffff:ffff:ffff:ffff:ffff:ffff", ac::reserved},
      {"2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff", ac::reserved},
      {"2001:200::", ac::public_routable},
  });
}

TEST(address_class, ipv6_documentation) {
  check({
      {"2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", ac::public_routable},
      {"2001:db8::", ac::documentation},
      {"2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", ac::documentation},
      {"2001:db9::", ac::public_routable},
      {"3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ac::public_routable},
      {"3fff::", ac::documentation},
      {"3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff", ac::documentation},
      {"3fff:1000::", ac::public_routable},
  });
}

TEST(address_class, ipv6_local_scopes) {
  check({
      {"fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ac::reserved},
      {"fc00::", ac::unique_local},
      {"fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ac::unique_local},
      {"fe00::", ac::reserved},
      {"fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ac::reserved},
      {"fe80::", ac::link_local},
      {"febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ac::link_local},
      {"fec0::", ac::reserved},
      {"feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ac::reserved},
      {"ff00::", ac::multicast},
      {"ff02::1", ac::multicast},
      {"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ac::multicast},
  });
}

TEST(address_class, ipv6_metadata) {
  check({{"fd00:ec2::254", ac::metadata},
         {"fd00:ec2::253", ac::unique_local},
         {"fd00:ec2::255", ac::unique_local},
         {"fd20:ce::254", ac::metadata}});
}

TEST(address_class, ipv6_outside_global_unicast_is_reserved) {
  check({
      {"100::", ac::reserved},
      {"100::ffff:ffff:ffff:ffff", ac::reserved},
      {"100:0:0:1::", ac::reserved},
      {"1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ac::reserved},
      {"2000::", ac::public_routable},
      {"3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", ac::public_routable},
      {"4000::", ac::reserved},
      {"5f00::1", ac::reserved},
  });
}

TEST(address_range, a_prefix_holds_what_shares_its_bits_and_nothing_else) {
  const auto vpn = parse_address_range("10.8.0.0/16");
  ASSERT_TRUE(vpn);
  EXPECT_TRUE(vpn->contains(*ip_address::parse("10.8.0.1")));
  EXPECT_TRUE(vpn->contains(*ip_address::parse("10.8.255.255")));
  EXPECT_FALSE(vpn->contains(*ip_address::parse("10.9.0.1")));
  EXPECT_FALSE(vpn->contains(*ip_address::parse("::ffff:10.8.0.1"))) << "another family";
  const auto odd = parse_address_range("192.168.1.128/25");
  ASSERT_TRUE(odd);
  EXPECT_TRUE(odd->contains(*ip_address::parse("192.168.1.200")));
  EXPECT_FALSE(odd->contains(*ip_address::parse("192.168.1.127")));
  const auto v6 = parse_address_range("fd00:1234::/32");
  ASSERT_TRUE(v6);
  EXPECT_TRUE(v6->contains(*ip_address::parse("fd00:1234:5::1")));
  EXPECT_FALSE(v6->contains(*ip_address::parse("fd00:1235::1")));
  const auto one = parse_address_range("127.0.0.1");
  ASSERT_TRUE(one);
  EXPECT_EQ(one->prefix, 32);
  EXPECT_FALSE(one->contains(*ip_address::parse("127.0.0.2")));
  EXPECT_TRUE(parse_address_range("0.0.0.0/0")->contains(*ip_address::parse("8.8.8.8")));
}

TEST(address_range, text_that_is_no_range_is_refused) {
  for (const char* bad :
       {"", "10.8.0.0/", "10.8.0.0/33", "10.8.0.0/1x", "10.8.0.0/-1", "10.1.2.3/8", "fd00::1/8",
        "example.com/8", "10.8.0.0/16/1", "::/129", "10.8/16"}) {
    EXPECT_FALSE(parse_address_range(bad)) << bad;
  }
}

}  // namespace
}  // namespace surge::proto
