// Connections sized by need (engine/net/connection_need.hpp) through the real client: a spike
// of requests to an origin whose pool already holds what its steady flow needs waits for the
// busy connections to come back instead of opening one each; with waiting off, each opens its
// own. A real client on loopback against a peer on plain sockets that answers each request
// after a delay, as a partner far away does.
#include "engine/net/http_client.hpp"
#include "tests/engine/net/thread_peer.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

namespace surge::engine {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

// Answers every request with a keep-alive 204 after `delay`, on each connection.
class slow_peer {
 public:
  explicit slow_peer(std::chrono::milliseconds delay)
      : delay_(delay), peer_([this](tcp::socket& socket, std::size_t) { serve(socket); }) {}
  std::uint16_t port() const { return peer_.port(); }
  int connections() const { return peer_.connections(); }

 private:
  void serve(tcp::socket& socket) {
    asio::streambuf input;
    boost::system::error_code ec;
    for (;;) {
      // The client's requests here carry no body; the read ends when the client closes.
      const auto head_bytes = asio::read_until(socket, input, "\r\n\r\n", ec);
      if (ec) return;
      input.consume(head_bytes);
      std::this_thread::sleep_for(delay_);
      asio::write(socket, asio::buffer(std::string_view("HTTP/1.1 204 No Content\r\n\r\n")), ec);
      if (ec) return;
    }
  }

  std::chrono::milliseconds delay_;  // declared first: the peer's threads read it
  testing::thread_peer peer_;
};

const std::string request = "POST /hook HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n";

struct spike_outcome {
  int connections = 0;  // the peer accepted
  int answered = 0;     // 204s, of steady_senders' requests and the spike's
  int sent = 0;
};

// `steady` senders each send one request after another for a while (the origin's need is
// measured), then `spike` more requests go at once on top of them; the steady senders go on
// until the spike is answered.
spike_outcome steady_flow_then_spike(const connection_need_config& sizing, int steady, int spike) {
  slow_peer peer(20ms);
  asio::io_context io;
  http_client_config config;
  config.allow_private_targets = true;
  config.attempt_timeout = 10s;
  config.pool_sizing = sizing;
  spike_outcome outcome;
  {
    http_client client(io.get_executor(), nullptr, config);
    const auto target =
        proto::parse_target_url("http://127.0.0.1:" + std::to_string(peer.port()) + "/hook")
            .value.value();
    bool stop = false;
    int spike_left = spike;
    auto send_one = [&]() -> asio::awaitable<void> {
      const auto result = co_await client.send(target, request);
      ++outcome.sent;
      if (result.status == 204) ++outcome.answered;
    };
    for (int i = 0; i < steady; ++i) {
      asio::co_spawn(
          io,
          [&]() -> asio::awaitable<void> {
            while (!stop) co_await send_one();
          },
          asio::detached);
    }
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          asio::steady_timer timer(io, 3 * sizing.window);
          co_await timer.async_wait(asio::use_awaitable);
          for (int i = 0; i < spike; ++i) {
            asio::co_spawn(
                io,
                [&]() -> asio::awaitable<void> {
                  co_await send_one();
                  if (--spike_left == 0) stop = true;
                },
                asio::detached);
          }
        },
        asio::detached);
    io.run();
    client.close_idle();
  }
  outcome.connections = peer.connections();
  return outcome;
}

connection_need_config tight_sizing() {
  connection_need_config sizing;
  sizing.window = 400ms;
  sizing.headroom = 1.0;
  sizing.spare = 1;
  sizing.busy_per_waiting = 2;
  sizing.max_wait = 2s;  // longer than the spike takes: no request opens for having waited
  return sizing;
}

TEST(HttpPoolSizing, ASpikeWaitsForTheBusyConnectionsOfAPoolAtItsNeed) {
  // 16 at once, steadily: the pool needs 16 + 1. The spike of 8 finds all of them busy, and
  // at most 2 busy per waiting request: it waits for them.
  const auto outcome = steady_flow_then_spike(tight_sizing(), 16, 8);
  EXPECT_EQ(outcome.answered, outcome.sent);
  EXPECT_GE(outcome.sent, 16 * 3 + 8);
  // The spike's own demand raises the need a little while it waits (its share of the window).
  EXPECT_LE(outcome.connections, 20) << "the steady 16, the spare, and the spike's share of "
                                        "the window; a connection each would be 24";
}

TEST(HttpPoolSizing, WithoutWaitingEachRequestOfTheSpikeOpensItsOwn) {
  auto sizing = tight_sizing();
  sizing.max_wait = 0ms;
  const auto outcome = steady_flow_then_spike(sizing, 16, 8);
  EXPECT_EQ(outcome.answered, outcome.sent);
  EXPECT_EQ(outcome.connections, 24);
}

TEST(HttpPoolSizing, ASpikeTooLargeForTheBusyConnectionsOpensAtOnce) {
  // 40 more on 16 busy: waiting would take two and a half answers' time; the rate has risen,
  // and the connections open (up to one busy per two waiting; the rest wait).
  const auto outcome = steady_flow_then_spike(tight_sizing(), 16, 40);
  EXPECT_EQ(outcome.answered, outcome.sent);
  EXPECT_GE(outcome.connections, 16 + 20);
}

}  // namespace
}  // namespace surge::engine
