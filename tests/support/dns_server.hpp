#pragma once
// A small authoritative DNS server on 127.0.0.1 (UDP) for tests, on its own thread: each name
// is answered with IPv4 addresses and a TTL, after a delay, or with NXDOMAIN, or never.
// Partners "with their own DNS" in tests, and a count of the queries each name got. AAAA
// queries of an answered name get an empty answer (the name has no IPv6 address).
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace surge::testing {

class dns_server {
 public:
  struct rule {
    enum class kind { answer, nxdomain, silent } what = kind::answer;
    std::vector<std::string> ipv4;  // for `answer`
    std::uint32_t ttl = 60;
    std::chrono::milliseconds delay{0};
  };

  dns_server();  // listens on 127.0.0.1 and an ephemeral port; throws when it cannot
  ~dns_server();
  dns_server(const dns_server&) = delete;
  dns_server& operator=(const dns_server&) = delete;

  // Names not set get NXDOMAIN. Case-insensitive, without the trailing dot.
  void set(const std::string& name, rule r);
  std::uint16_t port() const;
  std::string address() const { return "127.0.0.1:" + std::to_string(port()); }
  // A (type 1) queries received for `name` so far.
  int a_queries(const std::string& name) const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace surge::testing
