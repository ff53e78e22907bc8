#include "proto/target_policy.hpp"
#include "proto/header_value.hpp"

#include <boost/url/ipv4_address.hpp>
#include <boost/url/ipv6_address.hpp>
#include <boost/url/parse.hpp>
#include <boost/url/url_view.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>

namespace surge::proto {
namespace {

using bytes16 = std::array<std::uint8_t, 16>;

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

std::string to_lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), lower);
  return out;
}

std::string_view trim(std::string_view text) {
  constexpr std::string_view space = " \t\r\n";
  const std::size_t first = text.find_first_not_of(space);
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(space) - first + 1);
}

target_parse failure(std::string message) { return {std::nullopt, std::move(message)}; }

bool is_hex_number(std::string_view label) {
  if (label.size() < 2 || label[0] != '0' || lower(label[1]) != 'x') return false;
  return label.substr(2).find_first_not_of("0123456789abcdefABCDEF") == std::string_view::npos;
}

// Resolvers read names like "127.1", "0x7f.1" or "2130706433" as IPv4 addresses (inet_aton
// forms), so a name whose last label is numeric is refused outright, as WHATWG URL does.
bool ends_in_number(std::string_view host) {
  if (host.ends_with('.')) host.remove_suffix(1);
  const std::size_t dot = host.rfind('.');
  const std::string_view last = dot == std::string_view::npos ? host : host.substr(dot + 1);
  if (last.empty()) return false;
  return last.find_first_not_of("0123456789") == std::string_view::npos || is_hex_number(last);
}

bool valid_host_name(std::string_view host) {
  return !host.empty() && host.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-._") ==
                              std::string_view::npos;
}

std::optional<std::uint16_t> parse_port(std::string_view text) {
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || value == 0 || value > 65535) {
    return std::nullopt;
  }
  return static_cast<std::uint16_t>(value);
}

struct v4_range {
  std::uint32_t base;
  int bits;
  address_class kind;
};

constexpr std::uint32_t v4_of(unsigned a, unsigned b, unsigned c, unsigned d) {
  return (a << 24) | (b << 16) | (c << 8) | d;
}

// First match wins, so exact addresses come before the blocks that hold them.
constexpr v4_range v4_ranges[] = {
    {v4_of(169, 254, 169, 254), 32, address_class::metadata},  // AWS, GCP, Azure, OCI
    {v4_of(169, 254, 170, 2), 32, address_class::metadata},    // AWS ECS task metadata
    {v4_of(100, 100, 100, 200), 32, address_class::metadata},  // Alibaba Cloud
    {v4_of(192, 0, 0, 192), 32, address_class::metadata},      // OCI (legacy)
    {v4_of(0, 0, 0, 0), 8, address_class::unspecified},
    {v4_of(10, 0, 0, 0), 8, address_class::private_use},
    {v4_of(100, 64, 0, 0), 10, address_class::shared_cgnat},
    {v4_of(127, 0, 0, 0), 8, address_class::loopback},
    {v4_of(169, 254, 0, 0), 16, address_class::link_local},
    {v4_of(172, 16, 0, 0), 12, address_class::private_use},
    {v4_of(192, 0, 0, 0), 24, address_class::reserved},  // IETF protocol assignments
    {v4_of(192, 0, 2, 0), 24, address_class::documentation},
    {v4_of(192, 88, 99, 0), 24, address_class::reserved},  // former 6to4 relay anycast
    {v4_of(192, 168, 0, 0), 16, address_class::private_use},
    {v4_of(198, 18, 0, 0), 15, address_class::reserved},  // benchmarking
    {v4_of(198, 51, 100, 0), 24, address_class::documentation},
    {v4_of(203, 0, 113, 0), 24, address_class::documentation},
    {v4_of(224, 0, 0, 0), 4, address_class::multicast},
    {v4_of(255, 255, 255, 255), 32, address_class::broadcast},
    {v4_of(240, 0, 0, 0), 4, address_class::reserved},
};

address_class classify_v4(std::uint32_t address) {
  for (const v4_range& r : v4_ranges) {
    const std::uint32_t mask = r.bits == 0 ? 0 : ~std::uint32_t{0} << (32 - r.bits);
    if ((address & mask) == r.base) return r.kind;
  }
  return address_class::public_routable;
}

std::uint32_t v4_at(const bytes16& b, std::size_t offset) {
  return (std::uint32_t{b[offset]} << 24) | (std::uint32_t{b[offset + 1]} << 16) |
         (std::uint32_t{b[offset + 2]} << 8) | std::uint32_t{b[offset + 3]};
}

struct v6_range {
  bytes16 base;
  int bits;
  address_class kind;
};

bool in_prefix(const bytes16& address, const bytes16& base, int bits) {
  for (std::size_t i = 0; bits > 0; ++i, bits -= 8) {
    const auto mask = static_cast<std::uint8_t>(bits >= 8 ? 0xff : 0xff << (8 - bits));
    if ((address[i] & mask) != (base[i] & mask)) return false;
  }
  return true;
}

constexpr bytes16 v6(std::uint16_t g0, std::uint16_t g1 = 0, std::uint16_t g2 = 0,
                     std::uint16_t g7 = 0) {
  bytes16 b{};
  const std::uint16_t groups[] = {g0, g1, g2};
  for (std::size_t i = 0; i < 3; ++i) {
    b[2 * i] = static_cast<std::uint8_t>(groups[i] >> 8);
    b[2 * i + 1] = static_cast<std::uint8_t>(groups[i] & 0xff);
  }
  b[14] = static_cast<std::uint8_t>(g7 >> 8);
  b[15] = static_cast<std::uint8_t>(g7 & 0xff);
  return b;
}

constexpr v6_range v6_ranges[] = {
    {v6(0xfd00, 0x0ec2, 0, 0x0254), 128, address_class::metadata},  // AWS
    {v6(0xfd20, 0x00ce, 0, 0x0254), 128, address_class::metadata},  // GCP
    {v6(0xff00), 8, address_class::multicast},
    {v6(0xfe80), 10, address_class::link_local},
    {v6(0xfc00), 7, address_class::unique_local},
    {v6(0x2001, 0x0db8), 32, address_class::documentation},
    {v6(0x3fff), 20, address_class::documentation},  // RFC 9637
    // IETF protocol assignments: benchmarking 2001:2::/48, ORCHID 2001:10::/28, anycast
    // services. None is a place to deliver webhooks to.
    {v6(0x2001), 23, address_class::reserved},
};

// IPv4 carried inside IPv6 reaches (or claims to reach) that IPv4 host, so it is judged by it.
std::optional<address_class> classify_embedded(const bytes16& b) {
  const bool first_80_zero = std::all_of(b.begin(), b.begin() + 10, [](auto x) { return x == 0; });
  if (first_80_zero && b[10] == 0xff && b[11] == 0xff) return classify_v4(v4_at(b, 12));
  if (first_80_zero && b[10] == 0 && b[11] == 0) return classify_v4(v4_at(b, 12));
  if (in_prefix(b, v6(0x0064, 0xff9b), 96) || in_prefix(b, v6(0x0064, 0xff9b, 0x0001), 48)) {
    return classify_v4(v4_at(b, 12));
  }
  if (in_prefix(b, v6(0x2002), 16)) return classify_v4(v4_at(b, 2));
  if (in_prefix(b, v6(0x2001), 32)) {
    // Teredo hides the client address inverted. Teredo is obsolete and always relayed, so it is
    // never treated as public: a non-public client keeps its own class, any other is reserved.
    const address_class client = classify_v4(~v4_at(b, 12));
    return client == address_class::public_routable ? address_class::reserved : client;
  }
  return std::nullopt;
}

address_class classify_v6(const bytes16& b) {
  const bool zero_to_14 = std::all_of(b.begin(), b.begin() + 15, [](auto x) { return x == 0; });
  if (zero_to_14 && b[15] == 0) return address_class::unspecified;
  if (zero_to_14 && b[15] == 1) return address_class::loopback;
  if (const auto embedded = classify_embedded(b)) return *embedded;
  for (const v6_range& r : v6_ranges) {
    if (in_prefix(b, r.base, r.bits)) return r.kind;
  }
  // Only 2000::/3 is allocated as global unicast; the rest (100::/64 discard, fec0::/10, ...)
  // is reserved.
  if (!in_prefix(b, v6(0x2000), 3)) return address_class::reserved;
  return address_class::public_routable;
}

// Whether `c` may appear in a URL as written (RFC 3986: unreserved, reserved, or '%' of an
// escape).
bool url_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("-._~:/?#[]@!$&'()*+,;=%").find(c) != std::string_view::npos;
}

// Which part of a URL Boost.URL refused is wrong, in words an operator can act on (Boost.URL's
// own error names, "mismatch" or "leftover", say nothing about the URL): a predicate about it.
std::string url_problem(std::string_view url, const std::string& parser_said) {
  const auto colon = url.find(':');
  const std::string scheme = to_lower(url.substr(0, colon == std::string_view::npos ? 0 : colon));
  if (colon == std::string_view::npos || (scheme != "http" && scheme != "https")) {
    return "is not an http:// or https:// URL";
  }
  if (url.substr(colon + 1, 2) != "//") {
    return "does not start with " + scheme + "://";
  }
  const std::size_t start = colon + 3;
  const std::size_t end = std::min(url.find_first_of("/?#", start), url.size());
  std::string_view authority = url.substr(start, end - start);
  if (const auto at = authority.rfind('@'); at != std::string_view::npos) {
    authority.remove_prefix(at + 1);
  }
  if (authority.empty()) return "has no host";
  std::string_view host = authority;
  std::string_view port;
  bool has_port = false;
  if (authority.front() == '[') {
    const auto close = authority.find(']');
    if (close == std::string_view::npos) return "has an IPv6 address without its closing ']'";
    host = authority.substr(0, close + 1);
    const auto rest = authority.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') return "has characters after its IPv6 address";
    has_port = !rest.empty();
    if (has_port) port = rest.substr(1);
  } else if (const auto port_at = authority.rfind(':'); port_at != std::string_view::npos) {
    host = authority.substr(0, port_at);
    port = authority.substr(port_at + 1);
    has_port = true;
  }
  if (host.empty()) return "has no host";
  for (const char c : host) {
    if (!url_char(c) || c == '[' || c == ']') {
      return "has a character not allowed in a host name ('" + std::string(1, c) + "')";
    }
  }
  if (has_port) {
    const auto digits = port.find_first_not_of("0123456789");
    if (digits == 0) return "has a port that is not a number";
    if (digits != std::string_view::npos) return "has characters after the port";
  }
  for (std::size_t i = end; i < url.size(); ++i) {
    const char c = url[i];
    if (!url_char(c)) {
      return "has a character not allowed in a URL at position " + std::to_string(i + 1) +
             " (escape it as %XX)";
    }
    if (c == '%' &&
        (i + 2 >= url.size() || !std::isxdigit(static_cast<unsigned char>(url[i + 1])) ||
         !std::isxdigit(static_cast<unsigned char>(url[i + 2])))) {
      return "has a '%' at position " + std::to_string(i + 1) + " that is not a %XX escape";
    }
  }
  return "is not a valid URL (" + parser_said + ")";
}

}  // namespace

target_parse parse_target_url(std::string_view url) {
  const auto parsed = boost::urls::parse_uri(trim(url));
  if (!parsed) return failure(url_problem(trim(url), parsed.error().message()));
  const boost::urls::url_view& u = *parsed;

  const std::string scheme = to_lower(u.scheme());
  if (scheme != "http" && scheme != "https") {
    return failure("is not an http:// or https:// URL (its scheme is '" + std::string(u.scheme()) +
                   "')");
  }
  if (u.has_userinfo()) return failure("has user info (user:password@ before the host)");
  if (!u.has_authority()) return failure("does not start with " + scheme + "://");

  // Boost.URL 1.81 reads "1.2.3.4.example.com" as host 1.2.3.4 plus path ".example.com"
  // (boostorg/url#770); after an authority a real path is empty or starts with '/'.
  const std::string_view path = u.encoded_path();
  if (u.has_authority() && !path.empty() && !path.starts_with('/')) {
    // Likewise "host:443x/h" reads as port 443 plus path "x/h".
    if (u.has_port()) {
      return failure(u.port().empty() ? "has a port that is not a number"
                                      : "has characters after the port");
    }
    const std::string name =
        std::string(u.encoded_host()) + std::string(path.substr(0, path.find_first_of("/:")));
    return failure("has an unsupported host '" + name +
                   "': a name may not begin with an IPv4 address");
  }

  target t;
  t.tls = scheme == "https";
  bool bracketed = false;
  switch (u.host_type()) {
    case boost::urls::host_type::ipv4: t.host = u.host_ipv4_address().to_string(); break;
    case boost::urls::host_type::ipv6:
      t.host = u.host_ipv6_address().to_string();
      bracketed = true;
      break;
    case boost::urls::host_type::name: {
      t.host = to_lower(u.host_name());
      if (t.host.empty()) return failure("has no host");
      if (!valid_host_name(t.host)) return failure("has an invalid host name '" + t.host + "'");
      if (ends_in_number(t.host)) {
        return failure("has a numeric host '" + t.host +
                       "' that is not a dotted-quad IPv4 address");
      }
      break;
    }
    case boost::urls::host_type::ipvfuture:
      return failure("has an unsupported IP literal '" + std::string(u.encoded_host()) + "'");
    case boost::urls::host_type::none: return failure("has no host");
  }

  const std::uint16_t default_port = t.tls ? 443 : 80;
  t.port = default_port;
  // An empty port ("http://host:/") means the default, per RFC 3986 section 3.2.3.
  if (u.has_port() && !u.port().empty()) {
    const auto port = parse_port(u.port());
    if (!port) return failure("has an invalid port '" + std::string(u.port()) + "' (1-65535)");
    t.port = *port;
  }

  t.path = path.empty() ? "/" : std::string(path);
  if (u.has_query()) t.path += "?" + std::string(u.encoded_query());

  const std::string host_text = bracketed ? "[" + t.host + "]" : t.host;
  t.host_header = host_text;
  if (t.port != default_port) t.host_header += ":" + std::to_string(t.port);
  // Boost.URL's grammar already keeps raw controls and spaces out; this makes the request line
  // and Host header safe by this module's own rule rather than by a library's parser.
  if (const auto problem = request_target_problem(t.path); !problem.empty()) {
    return failure("has an unsafe path or query: " + std::string(problem));
  }
  if (const auto problem = header_value_problem(t.host_header); !problem.empty()) {
    return failure("has an unsafe host: " + std::string(problem));
  }
  t.origin_key = scheme + "://" + host_text + ":" + std::to_string(t.port);
  return {std::move(t), {}};
}

std::string redact_url(std::string_view url) {
  std::string out;
  const auto scheme_end = url.find("://");
  const std::size_t authority_start = scheme_end == std::string_view::npos ? 0 : scheme_end + 3;
  out.append(url.substr(0, authority_start));
  const auto authority_end = std::min(url.find_first_of("/?#", authority_start), url.size());
  const std::string_view authority = url.substr(authority_start, authority_end - authority_start);
  if (const auto at = authority.rfind('@'); at != std::string_view::npos) {
    out += "***";
    out.append(authority.substr(at));
  } else {
    out.append(authority);
  }
  const auto query_start = std::min(url.find_first_of("?#", authority_end), url.size());
  out.append(url.substr(authority_end, query_start - authority_end));
  if (query_start == url.size()) return out;
  const auto fragment_start = std::min(url.find('#', query_start), url.size());
  if (url[query_start] == '?') {
    out += '?';
    std::string_view query = url.substr(query_start + 1, fragment_start - query_start - 1);
    bool first = true;
    while (true) {
      const auto end = std::min(query.find('&'), query.size());
      const std::string_view pair = query.substr(0, end);
      if (!first) out += '&';
      first = false;
      if (const auto eq = pair.find('='); eq != std::string_view::npos) {
        out.append(pair.substr(0, eq + 1));
        out += "***";
      } else if (!pair.empty()) {
        out += "***";  // a bare value ("?s3cr3t") is as secret as a named one
      }
      if (end == query.size()) break;
      query.remove_prefix(end + 1);
    }
  }
  if (fragment_start < url.size()) out += "#***";
  return out;
}

ip_address ip_address::v4(std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d) {
  ip_address out;
  out.bytes[0] = a;
  out.bytes[1] = b;
  out.bytes[2] = c;
  out.bytes[3] = d;
  return out;
}

std::optional<ip_address> ip_address::parse(std::string_view text) {
  // Boost.URL follows RFC 3986: four decimal octets without leading zeros, no inet_aton forms.
  if (const auto v4 = boost::urls::parse_ipv4_address(text)) {
    const auto b = v4->to_bytes();
    return ip_address::v4(b[0], b[1], b[2], b[3]);
  }
  if (const auto v6 = boost::urls::parse_ipv6_address(text)) {
    ip_address out;
    out.v6 = true;
    const auto b = v6->to_bytes();
    std::copy(b.begin(), b.end(), out.bytes.begin());
    return out;
  }
  return std::nullopt;
}

std::string_view to_string(address_class kind) {
  switch (kind) {
    case address_class::public_routable: return "public_routable";
    case address_class::unspecified: return "unspecified";
    case address_class::loopback: return "loopback";
    case address_class::private_use: return "private_use";
    case address_class::shared_cgnat: return "shared_cgnat";
    case address_class::link_local: return "link_local";
    case address_class::metadata: return "metadata";
    case address_class::multicast: return "multicast";
    case address_class::broadcast: return "broadcast";
    case address_class::reserved: return "reserved";
    case address_class::documentation: return "documentation";
    case address_class::unique_local: return "unique_local";
  }
  return "unknown";
}

address_class classify_address(const ip_address& address) {
  if (address.v6) return classify_v6(address.bytes);
  return classify_v4(v4_at(address.bytes, 0));
}

proxy_parse parse_proxy_url(std::string_view url) {
  auto parsed = parse_target_url(url);
  if (!parsed.value) return {std::nullopt, parsed.error};
  if (parsed.value->tls) {
    return {std::nullopt,
            "is not http://HOST:PORT (TLS to the proxy is not supported; HTTPS to partners "
            "runs end to end inside its tunnel)"};
  }
  if (parsed.value->path != "/") return {std::nullopt, "has a path (a proxy URL has none)"};
  return {proxy_address{std::move(parsed.value->host), parsed.value->port}, {}};
}

bool address_range::contains(const ip_address& address) const {
  if (address.v6 != base.v6) return false;
  for (int bit = 0; bit < prefix; ++bit) {
    const auto byte = static_cast<std::size_t>(bit / 8);
    const auto mask = static_cast<std::uint8_t>(0x80u >> (bit % 8));
    if ((address.bytes[byte] & mask) != (base.bytes[byte] & mask)) return false;
  }
  return true;
}

std::optional<address_range> parse_address_range(std::string_view text) {
  const auto slash = text.find('/');
  const auto address = ip_address::parse(text.substr(0, slash));
  if (!address) return std::nullopt;
  const int bits = address->v6 ? 128 : 32;
  int prefix = bits;
  if (slash != std::string_view::npos) {
    const auto digits = text.substr(slash + 1);
    if (digits.empty() || digits.size() > 3) return std::nullopt;
    prefix = 0;
    for (const char c : digits) {
      if (c < '0' || c > '9') return std::nullopt;
      prefix = prefix * 10 + (c - '0');
    }
    if (prefix > bits) return std::nullopt;
  }
  for (int bit = prefix; bit < bits; ++bit) {
    if (address->bytes[static_cast<std::size_t>(bit / 8)] & (0x80u >> (bit % 8))) {
      return std::nullopt;
    }
  }
  return address_range{*address, prefix};
}

}  // namespace surge::proto
