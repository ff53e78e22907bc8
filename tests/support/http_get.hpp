#pragma once
// A blocking HTTP GET on loopback for tests that read /metrics, /healthz or /_sink/stats.
#include <cstdint>
#include <string>

namespace surge::testing {

struct http_reply {
  int status = 0;  // 0 when the request failed
  std::string body;
};

http_reply http_get(std::uint16_t port, const std::string& target,
                    const std::string& host = "127.0.0.1");

}  // namespace surge::testing
