// The client's connection ceiling (http_client_config::max_connections, fitted to the process's
// file limit): a new connection past it first closes the connection idle longest, over every
// origin, so the idle connections of many partners never take the descriptors a request needs.
// A real client on loopback against peers on plain sockets that keep every connection open.
#include "engine/net/http_client.hpp"
#include "tests/engine/net/closing_peer.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

namespace surge::engine {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using test_peers::closing_peer;
using test_peers::loopback_target;
using test_peers::request;
using test_peers::scripts;

// A peer that answers every request and keeps its connections open until the client closes.
scripts keep_open() { return {{.answered = 1'000'000}}; }

proto::target target_of(const closing_peer& peer) { return loopback_target(peer.port()); }

class ceiling_client {
 public:
  explicit ceiling_client(std::size_t max_connections)
      : client_(io_.get_executor(), nullptr, config(max_connections),
                {.open_connections = &open_connections}) {}

  // Sends one request to each target at once and runs them to the end.
  std::vector<http_result> send(const std::vector<proto::target>& targets) {
    std::vector<http_result> results(targets.size());
    for (std::size_t i = 0; i < targets.size(); ++i) {
      asio::co_spawn(
          io_,
          [this, &results, &targets, i]() -> asio::awaitable<void> {
            results[i] = co_await client_.send(targets[i], request);
          },
          asio::detached);
    }
    io_.restart();
    io_.run();
    return results;
  }
  http_result send_one(const proto::target& target) { return send({target}).at(0); }

  std::atomic<std::int64_t> open_connections{0};

 private:
  static http_client_config config(std::size_t max_connections) {
    http_client_config config;
    config.allow_private_targets = true;
    config.attempt_timeout = 10s;
    config.max_connections = max_connections;
    return config;
  }

  asio::io_context io_;
  http_client client_;
};

// The peer reads the client's close on its own thread.
bool closed_within(const closing_peer& peer, int count, std::chrono::milliseconds wait) {
  const auto until = std::chrono::steady_clock::now() + wait;
  while (peer.closed_by_client() < count && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(5ms);
  }
  return peer.closed_by_client() >= count;
}

TEST(HttpConnectionCeiling, ANewConnectionPastTheCeilingClosesTheOneIdleLongest) {
  closing_peer first(keep_open()), second(keep_open()), third(keep_open());
  ceiling_client client(2);
  ASSERT_EQ(client.send_one(target_of(first)).status, 204);
  ASSERT_EQ(client.send_one(target_of(second)).status, 204);
  ASSERT_EQ(client.open_connections, 2);
  // Both idle, the first's longest: the third origin's connection takes its place.
  const auto third_result = client.send_one(target_of(third));
  EXPECT_EQ(third_result.status, 204) << third_result.detail;
  EXPECT_EQ(client.open_connections, 2);
  EXPECT_TRUE(closed_within(first, 1, 5s)) << "the first origin's idle connection was kept";
  EXPECT_EQ(second.closed_by_client(), 0);
  // The second origin's connection is still there to be reused.
  const auto again = client.send_one(target_of(second));
  EXPECT_EQ(again.status, 204) << again.detail;
  EXPECT_TRUE(again.reused_connection);
  EXPECT_EQ(second.connections(), 1);
}

TEST(HttpConnectionCeiling, WithoutACeilingEachOriginKeepsItsIdleConnection) {
  closing_peer first(keep_open()), second(keep_open()), third(keep_open());
  ceiling_client client(0);
  for (const auto* peer : {&first, &second, &third}) {
    ASSERT_EQ(client.send_one(target_of(*peer)).status, 204);
  }
  EXPECT_EQ(client.open_connections, 3);
  EXPECT_EQ(first.closed_by_client(), 0);
}

TEST(HttpConnectionCeiling, AConnectionCarryingARequestIsNeverClosedForRoom) {
  // With no connection idle, every one carries a request: the in-flight ceiling, which the
  // drain holds below this one, bounds them, and the requests all go.
  // The peers outlive the client: its closing their connections ends their reads.
  closing_peer peer(keep_open()), other(keep_open());
  ceiling_client client(1);
  const auto target = target_of(peer);
  for (const auto& result : client.send({target, target, target})) {
    EXPECT_EQ(result.status, 204) << result.detail;
  }
  EXPECT_EQ(peer.connections(), 3);
  EXPECT_EQ(client.open_connections, 3);
  // Idle connections above the ceiling wait for a new connection to need their room: one
  // reused costs none.
  const auto reused = client.send_one(target);
  EXPECT_EQ(reused.status, 204) << reused.detail;
  EXPECT_TRUE(reused.reused_connection);
  // Another origin's new connection takes the room of all three.
  const auto elsewhere = client.send_one(target_of(other));
  EXPECT_EQ(elsewhere.status, 204) << elsewhere.detail;
  EXPECT_EQ(client.open_connections, 1);
  EXPECT_TRUE(closed_within(peer, 3, 5s));
}

}  // namespace
}  // namespace surge::engine
