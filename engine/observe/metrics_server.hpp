#pragma once
// GET /metrics (Prometheus text), GET /healthz, and the live page (GET / and the
// /partners.json it reads) for a running drain, served from the control thread's io_context so
// that a slow scraper never competes with a shard.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

namespace surge::engine {

// Parses "HOST:PORT" with an IP address host ("[v6]:PORT" too); throws std::invalid_argument.
boost::asio::ip::tcp::endpoint parse_listen_address(const std::string& text);

class metrics_server {
 public:
  struct handlers {
    std::function<std::string()> metrics;
    std::function<std::string()> unhealthy_reason;  // empty: healthy
    std::function<std::string()> partners_json;     // engine/observe/live_page
  };

  // Binds `listen` ("HOST:PORT", port 0 picks one). Throws on a bad address or a busy port.
  metrics_server(boost::asio::io_context& io, const std::string& listen, handlers handlers);
  ~metrics_server();

  std::uint16_t port() const;
  void stop();

 private:
  struct state;
  std::shared_ptr<state> state_;
};

}  // namespace surge::engine
