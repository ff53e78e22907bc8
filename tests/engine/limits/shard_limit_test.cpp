#include "engine/limits/shard_limit.hpp"

#include <gtest/gtest.h>

namespace surge::engine {
namespace {

using namespace std::chrono_literals;
using clock = shard_limit::clock;

shard_limit_config config() {
  return {.initial = 16, .minimum = 8, .window = 100ms, .growth = 0.125};
}

// Feeds one window of samples, `queued` of them at 30 ms and the rest at 1 ms, each origin's
// acceptable latency being 10 ms; the last sample lands on the window's end and closes it.
clock::time_point feed_window(shard_limit& limit, clock::time_point at, int samples, int queued,
                              bool blocked = true) {
  for (int i = 0; i < samples; ++i) {
    at += 100ms / samples;
    if (blocked) limit.note_blocked();
    limit.on_latency(i < queued ? 30ms : 1ms, 10ms, at);
  }
  return at;
}

TEST(ShardLimit, StartsAtTheInitialLimitAndAdmitsBelowIt) {
  const auto now = clock::now();
  shard_limit limit(config(), 4096, true, now);
  for (int i = 0; i < 15; ++i) limit.on_start(now, 1s);
  EXPECT_TRUE(limit.admits_at(now));
  limit.on_start(now, 1s);
  EXPECT_FALSE(limit.admits_at(now));
  EXPECT_EQ(limit.limit(), 16);
}

TEST(ShardLimit, DoublesWhileItBindsAndExchangesDoNotQueueUpToTheShardsCap) {
  auto now = clock::now();
  shard_limit limit(config(), 100, true, now);
  now = feed_window(limit, now, 10, 0);
  EXPECT_EQ(limit.limit(), 32);
  now = feed_window(limit, now, 10, 0);
  EXPECT_EQ(limit.limit(), 64);
  now = feed_window(limit, now, 10, 0);
  EXPECT_EQ(limit.limit(), 100) << "never above the shard's share of --max-in-flight";
  feed_window(limit, now, 10, 0, false);
  EXPECT_EQ(limit.limit(), 100);
}

TEST(ShardLimit, DoesNotGrowWhenNothingWasHeldBack) {
  auto now = clock::now();
  shard_limit limit(config(), 4096, true, now);
  now = feed_window(limit, now, 10, 0, false);
  EXPECT_EQ(limit.limit(), 16);
}

// More than half of the window's exchanges queued: a queue the origins share. Shrinks by the
// queued samples' acceptable / latency (10/30), at most by half, then grows gently.
TEST(ShardLimit, ShrinksWhenMostExchangesQueueThenGrowsGently) {
  auto now = clock::now();
  shard_limit limit(config(), 4096, true, now);
  for (int i = 0; i < 3; ++i) now = feed_window(limit, now, 10, 0);
  ASSERT_EQ(limit.limit(), 128);
  now = feed_window(limit, now, 10, 6);
  EXPECT_EQ(limit.limit(), 64);
  now = feed_window(limit, now, 10, 0);
  EXPECT_EQ(limit.limit(), 72) << "an eighth after the first decrease, not doubling";
}

// One origin's own queue is its share of the samples: its limit handles it, the shard's holds.
TEST(ShardLimit, AMinorityOfQueuedExchangesDoesNotShrinkIt) {
  auto now = clock::now();
  shard_limit limit(config(), 4096, true, now);
  now = feed_window(limit, now, 10, 5);
  EXPECT_EQ(limit.limit(), 32);
}

TEST(ShardLimit, NeverShrinksBelowItsMinimum) {
  auto now = clock::now();
  shard_limit limit(config(), 4096, true, now);
  for (int i = 0; i < 5; ++i) now = feed_window(limit, now, 10, 10);
  EXPECT_EQ(limit.limit(), 8);
}

// An exchange with an origin that has no acceptable latency yet never counts as queued.
TEST(ShardLimit, AnOriginWithoutAnAcceptableLatencyYetIsNotQueueing) {
  auto now = clock::now();
  shard_limit limit(config(), 4096, true, now);
  for (int i = 0; i < 10; ++i) {
    now += 10ms;
    limit.note_blocked();
    limit.on_latency(5s, shard_limit::duration::max(), now);
  }
  EXPECT_EQ(limit.limit(), 32);
}

// Requests hanging at one host stop holding the shard's slots once overdue at their origin.
TEST(ShardLimit, OverdueAttemptsStopCountingAndSayWhen) {
  const auto now = clock::time_point{} + 1000s;
  shard_limit limit(config(), 4096, true, now);
  for (int i = 0; i < 10; ++i) limit.on_start(now, 1s);
  const auto slow = limit.on_start(now, 5s);
  EXPECT_EQ(limit.counted_in_flight(now), 11);
  const auto recount = limit.next_recount_at(now);
  EXPECT_GE(recount, now + 1s);
  EXPECT_LE(recount, now + 1s + 50ms);
  EXPECT_EQ(limit.counted_in_flight(recount - 1ms), 11);
  EXPECT_EQ(limit.counted_in_flight(recount), 1);
  limit.on_end(slow);
  EXPECT_EQ(limit.counted_in_flight(now), 10);
  EXPECT_EQ(limit.next_recount_at(recount), clock::time_point::max());
}

TEST(ShardLimit, DisabledItAdmitsEverything) {
  const auto now = clock::now();
  shard_limit limit(config(), 4096, false, now);
  for (int i = 0; i < 100; ++i) limit.on_start(now, 1s);
  EXPECT_TRUE(limit.admits_at(now));
}

}  // namespace
}  // namespace surge::engine
