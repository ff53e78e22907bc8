#pragma once
// A peer on plain sockets on loopback for the HTTP client's tests: it accepts connections on
// its own thread and serves each on a thread of its own with `serve`, given the connection's
// place in line (0 for the first). Blocking calls, so a test's peer reads as a script.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

namespace surge::engine::testing {

class thread_peer {
 public:
  using tcp = boost::asio::ip::tcp;
  using serve_connection = std::function<void(tcp::socket&, std::size_t index)>;

  explicit thread_peer(serve_connection serve)
      : serve_(std::move(serve)),
        acceptor_(io_, tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0)),
        port_(acceptor_.local_endpoint().port()),
        thread_([this] { run(); }) {}
  ~thread_peer() {
    done_ = true;
    boost::system::error_code ignored;
    tcp::socket poke(io_);  // wakes the blocking accept
    poke.connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port_), ignored);
    thread_.join();
    for (auto& server : servers_) server.join();
  }
  thread_peer(const thread_peer&) = delete;
  thread_peer& operator=(const thread_peer&) = delete;

  std::uint16_t port() const { return port_; }
  int connections() const { return connections_; }

 private:
  void run() {
    for (std::size_t index = 0;; ++index) {
      tcp::socket socket(io_);
      boost::system::error_code ec;
      acceptor_.accept(socket, ec);
      if (ec || done_) return;
      ++connections_;
      servers_.emplace_back(
          [this, index, socket = std::move(socket)]() mutable { serve_(socket, index); });
    }
  }

  serve_connection serve_;
  boost::asio::io_context io_;
  tcp::acceptor acceptor_;
  std::uint16_t port_;  // read once: the acceptor is busy in another thread's accept
  std::atomic<bool> done_{false};
  std::atomic<int> connections_{0};
  std::vector<std::thread> servers_;  // touched by the accepting thread only, until joined
  std::thread thread_;
};

}  // namespace surge::engine::testing
