// The attempt deadline of the HTTP client's exchange (engine/net/http_client,
// engine/net/deadline_slots): a peer that never answers, or never even reads the request, ends
// the exchange as a timeout at the deadline; an exchange that finishes in time leaves no timer
// behind. A real client on loopback against a peer on a plain socket.
#include "engine/net/http_client.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>

namespace surge::engine {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

enum class peer_behaviour { never_reads, reads_never_answers, answers };

// Accepts one connection on its own thread and behaves as told until `release` is set or the
// client goes away.
class peer {
 public:
  explicit peer(peer_behaviour behaviour)
      : acceptor_(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)),
        thread_([this, behaviour] { run(behaviour); }) {}
  ~peer() {
    release_ = true;
    thread_.join();
  }
  std::uint16_t port() const { return acceptor_.local_endpoint().port(); }

 private:
  void run(peer_behaviour behaviour) {
    tcp::socket socket(io_);
    boost::system::error_code ec;
    acceptor_.accept(socket, ec);
    if (ec) return;
    if (behaviour != peer_behaviour::never_reads) {
      asio::streambuf head;
      asio::read_until(socket, head, "\r\n\r\n", ec);
      if (behaviour == peer_behaviour::answers) {
        asio::write(socket, asio::buffer(std::string_view("HTTP/1.1 204 No Content\r\n\r\n")), ec);
      }
    }
    while (!release_) std::this_thread::sleep_for(10ms);
  }

  asio::io_context io_;
  tcp::acceptor acceptor_;
  std::atomic<bool> release_{false};
  std::thread thread_;
};

struct sent {
  http_result result;
  // After the exchange and every handler ready by then: whether the io_context still had work
  // (a timer left waiting, a socket operation left pending).
  bool work_left = false;
};

sent send_once(std::uint16_t port, std::size_t body_bytes, std::chrono::milliseconds timeout) {
  asio::io_context io;
  http_client_config config;
  config.allow_private_targets = true;
  config.attempt_timeout = timeout;
  http_client client(io.get_executor(), nullptr, config);
  const auto target =
      proto::parse_target_url("http://127.0.0.1:" + std::to_string(port) + "/hook").value;
  std::string request =
      "POST /hook HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: " + std::to_string(body_bytes) +
      "\r\n\r\n" + std::string(body_bytes, 'x');
  sent out;
  bool done = false;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        out.result = co_await client.send(*target, request);
        done = true;
      },
      asio::detached);
  while (!done && io.run_one() > 0) {
  }
  io.poll();
  out.work_left = !io.stopped();
  return out;
}

TEST(HttpDeadline, APeerThatNeverAnswersEndsAsATimeoutAtTheDeadline) {
  peer silent(peer_behaviour::reads_never_answers);
  const auto sent = send_once(silent.port(), 300, 400ms);
  EXPECT_EQ(sent.result.status, 0);
  EXPECT_EQ(sent.result.error, proto::transport_error::timeout) << sent.result.detail;
}

TEST(HttpDeadline, APeerThatNeverReadsEndsTheWriteAtTheDeadline) {
  peer deaf(peer_behaviour::never_reads);
  // Far more than both socket buffers hold, so the write itself waits on the peer.
  const auto sent = send_once(deaf.port(), 64 * 1024 * 1024, 400ms);
  EXPECT_EQ(sent.result.status, 0);
  EXPECT_EQ(sent.result.error, proto::transport_error::timeout) << sent.result.detail;
}

TEST(HttpDeadline, AnExchangeFinishedInTimeLeavesNoTimerBehind) {
  peer quick(peer_behaviour::answers);
  const auto sent = send_once(quick.port(), 300, 30s);
  EXPECT_EQ(sent.result.status, 204) << sent.result.detail;
  // The io_context ran out of work with the exchange: no wait for the 30 s deadline stayed
  // pending.
  EXPECT_FALSE(sent.work_left);
}

}  // namespace
}  // namespace surge::engine
