#pragma once
// tinyproxy (Debian tinyproxy) as an egress proxy Surge did not write: CONNECT tunnels to the
// ports it is told to allow, 403 for others, and a log line per request. One process in the
// foreground, its files in the test's directory.
#include <cstdint>
#include <string>
#include <vector>

#include "tests/support/temp_dir.hpp"
#include "tools/process.hpp"

namespace surge::testing {

class tinyproxy_process {
 public:
  // Listens on 127.0.0.1 and a free port; CONNECT is allowed to `connect_ports` only. Throws
  // std::runtime_error when tinyproxy is missing or does not come up.
  tinyproxy_process(const temp_dir& dir, const std::vector<std::uint16_t>& connect_ports);

  std::uint16_t port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // The request lines it logged, e.g. "CONNECT 127.0.0.1:8443 HTTP/1.1".
  std::vector<std::string> requests() const;

 private:
  std::string root_;
  std::uint16_t port_ = 0;
  tools::child_process process_;
};

}  // namespace surge::testing
