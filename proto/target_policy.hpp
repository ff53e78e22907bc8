#pragma once
// Where Surge may send: URL rules and the address classifier. No I/O here: the
// engine resolves and asks classify_address about every resolved address before connecting.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace surge::proto {

struct target {
  bool tls = false;         // https
  std::string host;         // without brackets for IPv6 literals, lower-cased
  std::uint16_t port = 0;   // explicit or the scheme default
  std::string path;         // origin-form request target: path plus "?query", "/" when empty
  std::string host_header;  // value for the Host header (brackets and non-default port kept)
  std::string origin_key;   // "scheme://host:port", identifies a connection pool
};

// `error` says what is wrong as a predicate about the URL, to be written after it:
// "'htp:/x' " + error reads "'htp:/x' is not an http:// or https:// URL"; others are "has no
// host", "has characters after the port", "has user info (...)". It never quotes the URL (it
// may carry credentials: show it with redact_url).
struct target_parse {
  std::optional<target> value;
  std::string error;  // set when value is empty
};

// http and https only; no userinfo; a host is required; no fragment is sent.
target_parse parse_target_url(std::string_view url);

// An egress proxy, "http://HOST:PORT": plain HTTP to the proxy (partners' TLS runs end to end
// inside its CONNECT tunnels), no path, no user info.
struct proxy_address {
  std::string host;  // as in target: lower-cased, IPv6 without brackets
  std::uint16_t port = 0;
  friend bool operator==(const proxy_address&, const proxy_address&) = default;
};
struct proxy_parse {
  std::optional<proxy_address> value;
  std::string error;  // set when value is empty; a predicate, as target_parse's
};
proxy_parse parse_proxy_url(std::string_view url);

// A subscriber URL fit to show an operator: user info becomes "***@" and every query value (and
// the fragment) "***", since partners put tokens there; scheme, host, port and path stay. Works
// on text that does not parse too, so a malformed URL never leaks what it carries.
std::string redact_url(std::string_view url);

struct ip_address {
  bool v6 = false;
  std::array<std::uint8_t, 16> bytes{};  // network order; IPv4 uses bytes[0..3]

  static ip_address v4(std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d);
  // Parses dotted-quad IPv4 (strict, four decimal parts) or IPv6 text (no brackets).
  static std::optional<ip_address> parse(std::string_view text);
  friend bool operator==(const ip_address&, const ip_address&) = default;
};

enum class address_class {
  public_routable,
  unspecified,   // 0.0.0.0/8, ::
  loopback,      // 127/8, ::1
  private_use,   // RFC 1918
  shared_cgnat,  // 100.64/10
  link_local,    // 169.254/16, fe80::/10
  metadata,      // 169.254.169.254, fd00:ec2::254 and friends
  multicast,
  broadcast,
  reserved,       // 240/4, IETF protocol assignments, benchmarking, other special-purpose
  documentation,  // TEST-NET-1/2/3, 2001:db8::/32
  unique_local,   // fc00::/7
};

std::string_view to_string(address_class kind);

// Classifies an address; IPv4 embedded in IPv6 (mapped, compatible, NAT64 64:ff9b::/96 and
// 64:ff9b:1::/48, 6to4 2002::/16, Teredo 2001::/32) is classified by the embedded IPv4 address.
address_class classify_address(const ip_address& address);

inline bool is_public(const ip_address& address) {
  return classify_address(address) == address_class::public_routable;
}

// A range of addresses an operator allows besides the public ones, "10.8.0.0/16" or "fd00::/8"
// (a bare address is the range of itself): narrower than allowing every private address.
struct address_range {
  ip_address base;  // the bits past the prefix are zero
  int prefix = 0;
  bool contains(const ip_address& address) const;
  friend bool operator==(const address_range&, const address_range&) = default;
};
// Parses "ADDRESS/PREFIX" or "ADDRESS"; none for anything else, or bits set past the prefix
// ("10.1.2.3/8" is most likely a typo for a narrower range, so it is refused, not widened).
std::optional<address_range> parse_address_range(std::string_view text);

}  // namespace surge::proto
