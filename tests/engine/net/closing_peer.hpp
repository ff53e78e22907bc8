#pragma once
// A peer on plain sockets for the HTTP client's tests: it answers requests with keep-alive 204s
// and closes connections the way servers close idle ones (after reading the next request,
// without answering it), by a script per connection.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>

#include "proto/target_policy.hpp"

namespace surge::engine::test_peers {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

// What the peer does with the requests it reads on one connection: it answers the first
// `answered` with a keep-alive 204, then closes the connection on the next, without an answer
// or after only a status line.
struct connection_script {
  int answered = 1;
  bool partial_then_close = false;
};

using scripts = std::vector<connection_script>;

// What the tests send: a request the peer reads whole (it has no body).
inline const std::string request =
    "POST /hook HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n";

// The URL of a peer listening on 127.0.0.1:`port`.
inline proto::target loopback_target(std::uint16_t port) {
  return proto::parse_target_url("http://127.0.0.1:" + std::to_string(port) + "/hook")
      .value.value();
}

// Accepts connections on its own thread, each served on a thread of its own by the script for
// its place in line (the last script serves every later connection).
class closing_peer {
 public:
  explicit closing_peer(scripts by_connection)
      : scripts_(std::move(by_connection)),
        acceptor_(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)),
        port_(acceptor_.local_endpoint().port()),
        thread_([this] { run(); }) {}
  ~closing_peer() {
    done_ = true;
    boost::system::error_code ignored;
    tcp::socket poke(io_);  // wakes the blocking accept
    poke.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port_), ignored);
    thread_.join();
    for (auto& server : servers_) server.join();
  }
  std::uint16_t port() const { return port_; }
  int connections() const { return connections_; }
  int requests_read() const { return requests_read_; }
  // Connections the client closed (the peer read their end) while the peer kept them open.
  int closed_by_client() const { return closed_by_client_; }

 private:
  void run() {
    for (std::size_t index = 0;; ++index) {
      tcp::socket socket(io_);
      boost::system::error_code ec;
      acceptor_.accept(socket, ec);
      if (ec || done_) return;
      ++connections_;
      const auto script = scripts_[std::min(index, scripts_.size() - 1)];
      servers_.emplace_back(
          [this, script, socket = std::move(socket)]() mutable { serve(socket, script); });
    }
  }

  void serve(tcp::socket& socket, const connection_script& script) {
    asio::streambuf input;
    boost::system::error_code ec;
    for (int request = 1;; ++request) {
      // The client's requests here carry no body; the read ends when the client closes.
      const auto head_bytes = asio::read_until(socket, input, "\r\n\r\n", ec);
      if (ec) {
        socket.close(ec);  // before it counts: a test may count on the descriptor being free
        ++closed_by_client_;
        return;
      }
      input.consume(head_bytes);
      ++requests_read_;
      if (request <= script.answered) {
        asio::write(socket, asio::buffer(std::string_view("HTTP/1.1 204 No Content\r\n\r\n")), ec);
        continue;
      }
      if (script.partial_then_close) {
        asio::write(socket, asio::buffer(std::string_view("HTTP/1.1 200 OK\r\n")), ec);
      }
      socket.close(ec);
      return;
    }
  }

  scripts scripts_;
  asio::io_context io_;
  tcp::acceptor acceptor_;
  std::uint16_t port_;  // read once: the acceptor is busy in another thread's accept
  std::atomic<bool> done_{false};
  std::atomic<int> connections_{0};
  std::atomic<int> requests_read_{0};
  std::atomic<int> closed_by_client_{0};
  std::vector<std::thread> servers_;  // touched by the accepting thread only, until joined
  std::thread thread_;
};

}  // namespace surge::engine::test_peers
