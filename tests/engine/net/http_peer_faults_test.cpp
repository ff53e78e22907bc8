// The HTTP client (engine/net/http_client, engine/net/deadline_slots) against peers that fail
// it, on real loopback sockets in this process: a peer that never answers, never even reads the
// request, or trickles its answer ends the exchange as a timeout at the attempt deadline, and a
// connection with half a response on it is not used again; a listener that never accepts ends
// the connect at the connect deadline; a reset after the request is told apart as such. An
// exchange that finishes in time leaves no timer behind.
#include "engine/net/http_client.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>

namespace surge::engine {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

enum class peer_behaviour {
  never_reads,
  reads_never_answers,
  answers,
  trickles,  // the status line and headers one byte per 50 ms: live, slower than any deadline
  resets,    // reads the request, then resets the connection (RST, SO_LINGER 0)
  strays     // answers each request with a 500, then 50 ms later with a 200 nobody asked for
};

// Accepts connections on its own thread, one at a time, and behaves as told on each until
// `release` is set or the client goes away.
class peer {
 public:
  explicit peer(peer_behaviour behaviour)
      : acceptor_(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {
    // Before the thread starts: it polls the acceptor, so that it sees `release` between tries.
    acceptor_.non_blocking(true);
    thread_ = std::thread([this, behaviour] { run(behaviour); });
  }
  ~peer() {
    release_ = true;
    thread_.join();
  }
  std::uint16_t port() const { return acceptor_.local_endpoint().port(); }
  int accepted() const { return accepted_; }

 private:
  void run(peer_behaviour behaviour) {
    while (!release_) {
      tcp::socket socket(io_);
      boost::system::error_code ec;
      acceptor_.accept(socket, ec);
      if (ec == asio::error::would_block || ec == asio::error::try_again) {
        std::this_thread::sleep_for(5ms);
        continue;
      }
      if (ec) return;
      ++accepted_;
      serve(socket, behaviour);
    }
  }

  void serve(tcp::socket& socket, peer_behaviour behaviour) {
    boost::system::error_code ec;
    if (behaviour != peer_behaviour::never_reads) {
      asio::streambuf head;
      asio::read_until(socket, head, "\r\n\r\n", ec);
    }
    if (behaviour == peer_behaviour::answers) {
      asio::write(socket, asio::buffer(std::string_view("HTTP/1.1 204 No Content\r\n\r\n")), ec);
    } else if (behaviour == peer_behaviour::resets) {
      socket.set_option(asio::socket_base::linger(true, 0), ec);
      socket.close(ec);
      return;
    } else if (behaviour == peer_behaviour::strays) {
      const std::string_view answer = "HTTP/1.1 500 Oops\r\nContent-Length: 0\r\n\r\n";
      const std::string_view stray = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
      while (!ec && !release_) {
        asio::write(socket, asio::buffer(answer), ec);
        std::this_thread::sleep_for(50ms);
        asio::write(socket, asio::buffer(stray), ec);
        asio::streambuf next;
        asio::read_until(socket, next, "\r\n\r\n", ec);  // the next request, if any
      }
      return;
    } else if (behaviour == peer_behaviour::trickles) {
      const std::string_view answer = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
      for (const char byte : answer) {
        if (release_ || asio::write(socket, asio::buffer(&byte, 1), ec) == 0 || ec) return;
        std::this_thread::sleep_for(50ms);
      }
    }
    while (!release_ && behaviour != peer_behaviour::trickles) std::this_thread::sleep_for(10ms);
  }

  asio::io_context io_;
  tcp::acceptor acceptor_;
  std::atomic<bool> release_{false};
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

// A loopback listener that never accepts. Linux completes handshakes into the accept queue by
// itself, so a plain listener would "accept" at the TCP level; with listen(fd, 0) the queue holds
// one connection, and once filler connections occupy it the kernel drops further SYNs, so a
// connect hangs until the client's own deadline, like a server too busy to answer.
class never_accepting_listener {
 public:
  never_accepting_listener() {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address = loopback(0);
    ::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address);
    ::listen(listener_, 0);
    socklen_t length = sizeof address;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    for (int i = 0; i < 3; ++i) fillers_.push_back(start_connect());
    std::this_thread::sleep_for(100ms);
  }
  ~never_accepting_listener() {
    for (int fd : fillers_) ::close(fd);
    ::close(listener_);
  }
  never_accepting_listener(const never_accepting_listener&) = delete;
  never_accepting_listener& operator=(const never_accepting_listener&) = delete;

  std::uint16_t port() const { return port_; }

  // Whether a fresh connect completes within `timeout`; it must not, or the test proves nothing.
  bool connects_within(std::chrono::milliseconds timeout) const {
    const int fd = start_connect();
    pollfd wait{fd, POLLOUT, 0};
    bool connected = false;
    if (::poll(&wait, 1, static_cast<int>(timeout.count())) == 1) {
      int error = 0;
      socklen_t length = sizeof error;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
      connected = error == 0;
    }
    ::close(fd);
    return connected;
  }

 private:
  static sockaddr_in loopback(std::uint16_t port) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(port);
    return address;
  }
  int start_connect() const {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    sockaddr_in address = loopback(port_);
    ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);  // EINPROGRESS
    return fd;
  }

  int listener_ = -1;
  std::uint16_t port_ = 0;
  std::vector<int> fillers_;
};

struct sent {
  std::vector<http_result> results;
  // After the exchanges and every handler ready by then: whether the io_context still had work
  // (a timer left waiting, a socket operation left pending).
  bool work_left = false;
  const http_result& result() const { return results.front(); }
};

struct deadlines {
  std::chrono::milliseconds attempt;
  std::chrono::milliseconds connect = std::chrono::seconds(4);
};

// `sends` requests one after another through one client, `gap` apart, as a subscriber's
// attempts go.
sent send(std::uint16_t port, std::size_t body_bytes, deadlines timeouts, int sends = 1,
          std::chrono::milliseconds gap = {}) {
  asio::io_context io;
  http_client_config config;
  config.allow_private_targets = true;
  config.attempt_timeout = timeouts.attempt;
  config.connect_timeout = timeouts.connect;
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
        asio::steady_timer pause(io);
        for (int i = 0; i < sends; ++i) {
          if (i > 0 && gap.count() > 0) {
            pause.expires_after(gap);
            co_await pause.async_wait(asio::use_awaitable);
          }
          out.results.push_back(co_await client.send(*target, request));
        }
        done = true;
      },
      asio::detached);
  while (!done && io.run_one() > 0) {
  }
  io.poll();
  out.work_left = !io.stopped();
  return out;
}

sent send_once(std::uint16_t port, std::size_t body_bytes, std::chrono::milliseconds timeout) {
  return send(port, body_bytes, {.attempt = timeout});
}

TEST(HttpDeadline, APeerThatNeverAnswersEndsAsATimeoutAtTheDeadline) {
  peer silent(peer_behaviour::reads_never_answers);
  const auto sent = send_once(silent.port(), 300, 400ms);
  EXPECT_EQ(sent.result().status, 0);
  EXPECT_EQ(sent.result().error, proto::transport_error::timeout) << sent.result().detail;
}

TEST(HttpDeadline, APeerThatNeverReadsEndsTheWriteAtTheDeadline) {
  peer deaf(peer_behaviour::never_reads);
  // Far more than both socket buffers hold, so the write itself waits on the peer.
  const auto sent = send_once(deaf.port(), 64 * 1024 * 1024, 400ms);
  EXPECT_EQ(sent.result().status, 0);
  EXPECT_EQ(sent.result().error, proto::transport_error::timeout) << sent.result().detail;
}

TEST(HttpDeadline, AnExchangeFinishedInTimeLeavesNoTimerBehind) {
  peer quick(peer_behaviour::answers);
  const auto sent = send_once(quick.port(), 300, 30s);
  EXPECT_EQ(sent.result().status, 204) << sent.result().detail;
  // The io_context ran out of work with the exchange: no wait for the 30 s deadline stayed
  // pending.
  EXPECT_FALSE(sent.work_left);
}

TEST(HttpPeerFaults, ATrickledAnswerEndsAtTheDeadlineAndItsConnectionIsNotUsedAgain) {
  peer trickling(peer_behaviour::trickles);
  const auto sent = send(trickling.port(), 300, {.attempt = 400ms}, 2);
  ASSERT_EQ(sent.results.size(), 2u);
  for (const auto& result : sent.results) {
    EXPECT_EQ(result.status, 0);
    EXPECT_EQ(result.error, proto::transport_error::timeout) << result.detail;
    EXPECT_FALSE(result.reused_connection) << "a connection with half a response on it";
  }
  EXPECT_EQ(trickling.accepted(), 2);
}

// Bytes that arrive while a connection sits idle answer no request of ours: the next request
// goes on a new connection and gets its own answer, never the stray one.
TEST(HttpPeerFaults, AnAnswerArrivingWhileIdleIsNeverTakenForTheNextRequests) {
  peer straying(peer_behaviour::strays);
  const auto sent = send(straying.port(), 300, {.attempt = 5s}, 2, 200ms);
  ASSERT_EQ(sent.results.size(), 2u);
  for (const auto& result : sent.results) EXPECT_EQ(result.status, 500) << result.detail;
  EXPECT_FALSE(sent.results[1].reused_connection);
  EXPECT_EQ(straying.accepted(), 2);
}

TEST(HttpPeerFaults, AListenerThatNeverAcceptsEndsAtTheConnectDeadline) {
  never_accepting_listener listener;
  ASSERT_FALSE(listener.connects_within(300ms))
      << "the kernel completed a connect past a full backlog; the test proves nothing";
  const auto began = std::chrono::steady_clock::now();
  const auto sent = send(listener.port(), 300, {.attempt = 5s, .connect = 300ms});
  EXPECT_EQ(sent.result().status, 0);
  EXPECT_EQ(sent.result().error, proto::transport_error::connect_timeout) << sent.result().detail;
  EXPECT_LT(std::chrono::steady_clock::now() - began, 4s) << "not the attempt deadline's end";
}

TEST(HttpPeerFaults, AResetAfterTheRequestIsAResetBeforeTheResponse) {
  peer resetting(peer_behaviour::resets);
  const auto sent = send(resetting.port(), 300, {.attempt = 5s});
  EXPECT_EQ(sent.result().status, 0);
  EXPECT_EQ(sent.result().error, proto::transport_error::reset_before_response)
      << sent.result().detail;
  EXPECT_NE(sent.result().detail.find("closed before a response"), std::string::npos)
      << sent.result().detail;
}

}  // namespace
}  // namespace surge::engine
