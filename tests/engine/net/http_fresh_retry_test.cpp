// The one fresh retry of the HTTP client (engine/net/connection_state decides it): a request that
// fails on a reused keep-alive connection before any response byte goes out once more on a new
// connection; a request that fails on a new connection, or after the server answered something,
// does not. A real client on loopback against a peer on plain sockets that closes connections
// the way servers close idle ones: after reading the next request, without answering it.
#include "engine/net/http_client.hpp"
#include "tests/engine/net/closing_peer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
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
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>

namespace surge::engine {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;
using test_peers::closing_peer;
using test_peers::connection_script;
using test_peers::loopback_target;
using test_peers::request;
using test_peers::scripts;

http_client_config client_config() {
  http_client_config config;
  config.allow_private_targets = true;
  config.attempt_timeout = 10s;
  // Long enough that a connection just parked still holds its buffer at the next sweep however
  // slowly a loaded machine runs this thread.
  config.idle_buffer_release = 1s;
  return config;
}

// One client sending to one peer. The peer is declared first, so it outlives the client: the
// client's closing its connections is what ends the peer's reads.
class client_and_peer {
 public:
  explicit client_and_peer(scripts by_connection)
      : peer(std::move(by_connection)),
        client_(io_.get_executor(), nullptr, client_config()),
        target_(loopback_target(peer.port())) {}

  // Sends `count` requests at once and runs them to the end.
  std::vector<http_result> send(int count) {
    std::vector<http_result> results(static_cast<std::size_t>(count));
    for (auto& result : results) {
      asio::co_spawn(
          io_, [&]() -> asio::awaitable<void> { result = co_await client_.send(target_, request); },
          asio::detached);
    }
    io_.restart();
    io_.run();
    return results;
  }
  http_result send_one() { return send(1).at(0); }
  http_client& client() { return client_; }

  closing_peer peer;

 private:
  asio::io_context io_;
  http_client client_;
  proto::target target_;
};

void expect_failed_without_answer(const http_result& result) {
  EXPECT_EQ(result.status, 0);
  EXPECT_NE(result.error, proto::transport_error::none);
}

// What the peer saw: connections accepted and requests read.
void expect_seen(const closing_peer& peer, int connections, int requests) {
  EXPECT_EQ(peer.connections(), connections);
  EXPECT_EQ(peer.requests_read(), requests);
}

TEST(HttpFreshRetry, ARequestLostOnAReusedConnectionGoesOutOnceMoreOnANewOne) {
  client_and_peer pair(scripts{{.answered = 1}});
  const auto first = pair.send_one();
  EXPECT_EQ(first.status, 204) << first.detail;
  EXPECT_FALSE(first.fresh_retry);
  // The second request finds the first's connection idle; the peer reads it and closes.
  const auto second = pair.send_one();
  EXPECT_EQ(second.status, 204) << second.detail;
  EXPECT_TRUE(second.fresh_retry);
  EXPECT_FALSE(second.reused_connection) << "answered on the new connection";
  expect_seen(pair.peer, 2, 3);
}

TEST(HttpFreshRetry, TheRetryOpensANewConnectionEvenWithAnotherIdle) {
  // A server that closed one idle connection has often closed the others too (a restart, its
  // keep-alive timeout).
  client_and_peer pair(scripts{{.answered = 1}});
  // Two requests at once open two connections; both go idle with their one answer spent.
  for (const auto& result : pair.send(2)) ASSERT_EQ(result.status, 204) << result.detail;
  ASSERT_EQ(pair.peer.connections(), 2);
  const auto third = pair.send_one();
  EXPECT_EQ(third.status, 204) << third.detail;
  EXPECT_TRUE(third.fresh_retry);
  expect_seen(pair.peer, 3, 4);
}

TEST(HttpFreshRetry, ARequestIsRetriedOnlyOnce) {
  // The retry's new connection fails too: that is the endpoint's answer.
  client_and_peer pair(scripts{{.answered = 1}, {.answered = 0}});
  ASSERT_EQ(pair.send_one().status, 204);
  const auto second = pair.send_one();
  expect_failed_without_answer(second);
  EXPECT_TRUE(second.fresh_retry);
  expect_seen(pair.peer, 2, 3);
}

TEST(HttpFreshRetry, AFailureOnANewConnectionIsNotRetried) {
  client_and_peer pair(scripts{{.answered = 0}});
  const auto result = pair.send_one();
  expect_failed_without_answer(result);
  EXPECT_FALSE(result.fresh_retry);
  expect_seen(pair.peer, 1, 1);
}

TEST(HttpFreshRetry, AnAnswerCutOffOnAReusedConnectionIsNotRetried) {
  // The server sent part of an answer: it may have acted on the request, so it is not sent again.
  client_and_peer pair(scripts{{.answered = 1, .partial_then_close = true}});
  ASSERT_EQ(pair.send_one().status, 204);
  const auto second = pair.send_one();
  expect_failed_without_answer(second);
  EXPECT_FALSE(second.fresh_retry);
  expect_seen(pair.peer, 1, 2);
}

// Thousands of connections to slow partners wait far more than they read: a connection idle
// for idle_buffer_release gives its read buffer back at the next sweep (OpenSSL's record
// buffers go too: SSL_MODE_RELEASE_BUFFERS, checked in tls_sessions_test), and one reused at
// once keeps it (freeing and allocating it per request would cost every busy connection).
TEST(HttpIdleConnection, AConnectionIdleForAWhileHoldsNoReadBufferAndIsStillReused) {
  client_and_peer pair(scripts{{.answered = 5}});
  const auto first = pair.send_one();
  EXPECT_EQ(first.status, 204) << first.detail;
  pair.client().evict_idle();
  EXPECT_GT(pair.client().idle_buffer_bytes(), 0u) << "just parked: it keeps its buffer";
  std::this_thread::sleep_for(1100ms);
  pair.client().evict_idle();
  EXPECT_EQ(pair.client().idle_buffer_bytes(), 0u);
  const auto second = pair.send_one();
  EXPECT_EQ(second.status, 204) << second.detail;
  EXPECT_TRUE(second.reused_connection);
  expect_seen(pair.peer, 1, 2);
}

}  // namespace
}  // namespace surge::engine
