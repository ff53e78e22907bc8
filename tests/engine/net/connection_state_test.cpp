#include "engine/net/connection_state.hpp"

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace surge::engine {
namespace {

using namespace std::chrono_literals;
const auto t0 = steady_time{} + 100s;

response_end clean_end() { return {.final_status = true, .keep_alive = true, .read_whole = true}; }

TEST(ConnectionLifecycle, ReusableOnlyWhenKeptAliveAndReadWhole) {
  connection_lifecycle kept;
  kept.on_connected();
  kept.on_exchange_start();
  kept.on_response_byte();
  kept.on_response_complete(clean_end());
  EXPECT_EQ(kept.phase(), connection_phase::idle);

  connection_lifecycle closed_by_server;
  closed_by_server.on_connected();
  closed_by_server.on_exchange_start();
  auto closing = clean_end();
  closing.keep_alive = false;
  closed_by_server.on_response_complete(closing);
  EXPECT_EQ(closed_by_server.phase(), connection_phase::closed);

  connection_lifecycle truncated;
  truncated.on_connected();
  truncated.on_exchange_start();
  auto unread = clean_end();
  unread.read_whole = false;
  truncated.on_response_complete(unread);
  EXPECT_EQ(truncated.phase(), connection_phase::closed);
}

// The TLS session of a connection is offered again only when it ended without a failure.
TEST(ConnectionLifecycle, EndedCleanlyUnlessAnExchangeOrTheConnectFailed) {
  connection_lifecycle connecting;
  EXPECT_FALSE(connecting.ended_cleanly());  // the connect or TLS handshake did not finish

  connection_lifecycle closed_by_server;
  closed_by_server.on_connected();
  closed_by_server.on_exchange_start();
  auto closing = clean_end();
  closing.keep_alive = false;
  closed_by_server.on_response_complete(closing);
  EXPECT_TRUE(closed_by_server.ended_cleanly());

  connection_lifecycle idle_then_closed;
  idle_then_closed.on_connected();
  idle_then_closed.on_idle_check(true);
  EXPECT_TRUE(idle_then_closed.ended_cleanly());

  connection_lifecycle failed;
  failed.on_connected();
  failed.on_exchange_start();
  failed.on_failure();
  EXPECT_FALSE(failed.ended_cleanly());
}

TEST(ConnectionLifecycle, FramingInDoubtIsNeverReused) {
  EXPECT_TRUE(reusable_after(clean_end()));
  auto no_final = clean_end();
  no_final.final_status = false;  // only interim responses, or none
  EXPECT_FALSE(reusable_after(no_final));
  auto upgraded = clean_end();
  upgraded.switching_protocols = true;
  EXPECT_FALSE(reusable_after(upgraded));
  auto leftovers = clean_end();
  leftovers.bytes_left = true;  // pipelined or unsolicited bytes after the response
  EXPECT_FALSE(reusable_after(leftovers));
  auto early = clean_end();
  early.early = true;  // answered before the request was fully written
  EXPECT_FALSE(reusable_after(early));

  connection_lifecycle lifecycle;
  lifecycle.on_connected();
  lifecycle.on_exchange_start();
  lifecycle.on_response_complete(leftovers);
  EXPECT_EQ(lifecycle.phase(), connection_phase::closed);
}

TEST(ConnectionLifecycle, InputWhileIdleClosesTheConnection) {
  connection_lifecycle quiet;
  quiet.on_connected();
  quiet.on_exchange_start();
  quiet.on_response_complete(clean_end());
  quiet.on_idle_check(false);
  EXPECT_EQ(quiet.phase(), connection_phase::idle);

  connection_lifecycle noisy;
  noisy.on_connected();
  noisy.on_exchange_start();
  noisy.on_response_complete(clean_end());
  noisy.on_idle_check(true);  // an unsolicited response, or the server's EOF
  EXPECT_EQ(noisy.phase(), connection_phase::closed);
}

TEST(ConnectionLifecycle, FreshRetryOnlyForReusedConnectionWithoutResponseBytes) {
  const steady_time now{};
  const auto deadline = now + 1s;
  connection_lifecycle first_use;
  first_use.on_connected();
  first_use.on_exchange_start();
  first_use.on_failure();
  // A new connection failing is the endpoint's answer, not a stale keep-alive.
  EXPECT_FALSE(first_use.retry_on_fresh_connection(now, deadline));

  connection_lifecycle reused;
  reused.on_connected();
  reused.on_exchange_start();
  reused.on_response_complete(clean_end());
  reused.on_exchange_start();
  EXPECT_FALSE(reused.retry_on_fresh_connection(now, deadline));  // nothing failed yet
  reused.on_failure();
  EXPECT_TRUE(reused.retry_on_fresh_connection(now, deadline));

  connection_lifecycle partial;
  partial.on_connected();
  partial.on_exchange_start();
  partial.on_response_complete(clean_end());
  partial.on_exchange_start();
  partial.on_response_byte();
  partial.on_failure();
  // The server answered something: the request may have been acted on.
  EXPECT_FALSE(partial.retry_on_fresh_connection(now, deadline));
}

TEST(ConnectionLifecycle, FreshRetryOnlyBeforeTheDeadline) {
  const steady_time now{};
  connection_lifecycle reused;
  reused.on_connected();
  reused.on_exchange_start();
  reused.on_response_complete(clean_end());
  reused.on_exchange_start();
  reused.on_failure();
  EXPECT_TRUE(reused.retry_on_fresh_connection(now, now + 1ms));
  EXPECT_FALSE(reused.retry_on_fresh_connection(now, now));  // no time left
  EXPECT_FALSE(reused.retry_on_fresh_connection(now + 2ms, now + 1ms));
}

TEST(IdleList, HandsOutTheFreshestAndEvictsExpired) {
  idle_list<int> idle(4s);
  std::vector<int> expired;
  idle.put(1, t0);
  idle.put(2, t0 + 1s);
  idle.put(3, t0 + 2s);
  auto got = idle.take(t0 + 2s, expired);
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, 3);
  EXPECT_TRUE(expired.empty());
  // At t0 + 4.5s, connection 1 (idle since t0) is past the idle timeout; 2 is not.
  got = idle.take(t0 + 4500ms, expired);
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, 2);
  EXPECT_EQ(expired, std::vector<int>{1});
  EXPECT_FALSE(idle.take(t0 + 5s, expired));
}

// The buffer sweep's walk: newest first among those idle long enough, stopping at the first one
// an earlier sweep already changed, so each connection is visited about once.
TEST(IdleList, TheIdleSinceWalkStopsWhereAnEarlierSweepEnded) {
  idle_list<int> idle(60s);
  for (int i = 0; i < 5; ++i) idle.put(i, t0 + std::chrono::seconds(i));
  std::set<int> released;
  std::vector<int> visited;
  const auto sweep = [&](steady_time since) {
    visited.clear();
    idle.for_each_idle_since(since, [&](int& conn) {
      visited.push_back(conn);
      return released.insert(conn).second;
    });
  };
  sweep(t0 + 2s);
  EXPECT_EQ(visited, (std::vector<int>{2, 1, 0}));
  sweep(t0 + 3s);
  EXPECT_EQ(visited, (std::vector<int>{3, 2})) << "0 and 1 were released by the first sweep";
  sweep(t0 - 1s);
  EXPECT_TRUE(visited.empty());
}

TEST(IdleList, SweepClosesOnlyExpired) {
  idle_list<int> idle(4s);
  std::vector<int> expired;
  idle.put(1, t0);
  idle.put(2, t0 + 3s);
  idle.evict(t0 + 4s, expired);
  EXPECT_EQ(expired, std::vector<int>{1});
  EXPECT_EQ(idle.size(), 1u);
  std::vector<int> all;
  idle.clear(all);
  EXPECT_EQ(all, std::vector<int>{2});
  EXPECT_EQ(idle.size(), 0u);
}

}  // namespace
}  // namespace surge::engine
