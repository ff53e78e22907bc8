#include "engine/limits/origin_limit.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace surge::engine {
namespace {

using namespace std::chrono_literals;
using clock = origin_limit::clock;

origin_limit_config config() {
  return {.latency_tolerance = 2.0,
          .latency_slack = 1ms,
          .initial = 64,
          .minimum = 4,
          .window = 100ms,
          .best_latency_period = 5s,
          .growth = 0.125};
}

// Feeds `samples` latencies evenly over one window; the last lands on its end and closes it.
clock::time_point feed_window(origin_limit& limit, clock::time_point at, clock::duration latency,
                              bool blocked, int samples = 10) {
  for (int i = 0; i < samples; ++i) {
    at += 100ms / samples;
    if (blocked) limit.note_blocked();
    limit.on_latency(latency, at);
  }
  return at;
}

TEST(OriginLimit, StartsAtTheInitialLimitAndAdmitsBelowIt) {
  origin_limit limit(config(), clock::now());
  EXPECT_EQ(limit.limit(), 64);
  EXPECT_TRUE(limit.admits(63));
  EXPECT_FALSE(limit.admits(64));
}

TEST(OriginLimit, GrowsWhileItBindsAndLatencyStaysNearTheBest) {
  auto now = clock::now();
  origin_limit limit(config(), now);
  now = feed_window(limit, now, 200ms, true);
  now = feed_window(limit, now, 200ms, true);
  EXPECT_GT(limit.limit(), 64);
  const int after_two = limit.limit();
  for (int i = 0; i < 40; ++i) now = feed_window(limit, now, 200ms, true);
  // Doubling: a latency-bound endpoint reaches thousands of slots within a second.
  EXPECT_GT(limit.limit(), 5000);
  EXPECT_GT(limit.limit(), after_two);
}

TEST(OriginLimit, DoublesUntilTheFirstDecreaseThenGrowsGently) {
  auto now = clock::now();
  origin_limit limit(config(), now);
  now = feed_window(limit, now, 10ms, true);
  EXPECT_EQ(limit.limit(), 128);
  now = feed_window(limit, now, 10ms, true);
  EXPECT_EQ(limit.limit(), 256);
  now = feed_window(limit, now, 30ms, true);  // acceptable 2 * 10 + 1 = 21 ms: 21/30 of it
  EXPECT_EQ(limit.limit(), 179);
  now = feed_window(limit, now, 10ms, true);
  EXPECT_EQ(limit.limit(), 179 + 22);
}

TEST(OriginLimit, StartsSmallByDefault) {
  const origin_limit limit(origin_limit_config{}, clock::now());
  EXPECT_EQ(limit.limit(), 4);
}

// At a fast origin the slack is what decides how much may queue: with the best latency at
// 0.1 ms, 3 ms per exchange is queueing under the default 2 ms of slack, and acceptable under 5.
TEST(OriginLimit, AtAFastOriginTheSlackSetsTheQueueAllowed) {
  const auto limit_after = [](std::chrono::microseconds slack) {
    auto settings = config();
    settings.latency_slack = slack;
    auto now = clock::now();
    origin_limit limit(settings, now);
    now = feed_window(limit, now, 100us, true);
    now = feed_window(limit, now, 3ms, true);
    return limit.limit();
  };
  EXPECT_EQ(origin_limit_config{}.latency_slack, 2ms);
  EXPECT_EQ(limit_after(2ms), 128 * 22 / 30);  // acceptable 2 * 0.1 + 2 = 2.2 ms of 3
  EXPECT_EQ(limit_after(5ms), 256);            // still within 5.2 ms: keeps doubling
}

TEST(OriginLimit, DoesNotGrowWithoutDemand) {
  auto now = clock::now();
  origin_limit limit(config(), now);
  for (int i = 0; i < 20; ++i) now = feed_window(limit, now, 200ms, false);
  EXPECT_EQ(limit.limit(), 64);
}

TEST(OriginLimit, ShrinksInProportionWhenRequestsQueue) {
  auto now = clock::now();
  origin_limit limit(config(), now);
  now = feed_window(limit, now, 1ms, true);  // best latency 1 ms: acceptable 2 * 1 + 1 = 3 ms
  const int before = limit.limit();
  now = feed_window(limit, now, 4ms, true);  // 3/4 of the limit
  EXPECT_EQ(limit.limit(), static_cast<int>(before * 0.75));
  now = feed_window(limit, now, 60ms, true);  // at most halved per window
  EXPECT_EQ(limit.limit(), static_cast<int>(before * 0.75) / 2);
}

TEST(OriginLimit, NeverGoesBelowTheMinimum) {
  auto now = clock::now();
  origin_limit limit(config(), now);
  now = feed_window(limit, now, 1ms, false);
  for (int i = 0; i < 50; ++i) now = feed_window(limit, now, 500ms, false);
  EXPECT_EQ(limit.limit(), 4);
  EXPECT_TRUE(limit.admits(3));
}

TEST(OriginLimit, ForgetsAnOldBestLatencyAfterTwoPeriods) {
  auto now = clock::now();
  origin_limit limit(config(), now);
  limit.on_latency(1ms, now);
  EXPECT_EQ(limit.best_latency(), 1ms);
  // The endpoint is slower for good: 50 ms from now on.
  for (int i = 0; i < 110; ++i) now = feed_window(limit, now, 50ms, false);
  EXPECT_EQ(limit.best_latency(), 50ms);
  const int settled = limit.limit();
  // Judged against its new normal, it stops shrinking and, under demand, grows again.
  for (int i = 0; i < 5; ++i) now = feed_window(limit, now, 50ms, true);
  EXPECT_GT(limit.limit(), settled);
}

TEST(OriginLimit, ZeroToleranceTurnsItOff) {
  auto cfg = config();
  cfg.latency_tolerance = 0;
  auto now = clock::now();
  origin_limit limit(cfg, now);
  for (int i = 0; i < 20; ++i) now = feed_window(limit, now, 500ms, true);
  EXPECT_TRUE(limit.admits(1'000'000));
}

}  // namespace
}  // namespace surge::engine

namespace surge::engine {
namespace {

TEST(OriginLimitOverdue, AttemptsFarPastTheOriginsLatencyStopCounting) {
  auto now = clock::time_point{} + 1000s;
  auto cfg = config();
  cfg.initial = 4;
  origin_limit limit(cfg, now);
  // Before any latency is known, an attempt is overdue after overdue_unknown (1 s).
  std::vector<origin_limit::ticket> hanging;
  for (int i = 0; i < 4; ++i) hanging.push_back(limit.on_start(now));
  EXPECT_EQ(limit.counted_in_flight(now), 4);
  EXPECT_FALSE(limit.admits_at(now));
  const auto recount = limit.next_recount_at(now);
  EXPECT_GT(recount, now + 1s - 1ms);
  EXPECT_LE(recount, now + 1s + 50ms);
  EXPECT_FALSE(limit.admits_at(recount - 60ms));
  EXPECT_TRUE(limit.admits_at(recount));
  EXPECT_EQ(limit.counted_in_flight(recount), 0);
  EXPECT_EQ(limit.next_recount_at(recount), clock::time_point::max());
  // A hanging attempt that ends at last is forgotten either way.
  for (const auto ticket : hanging) limit.on_end(ticket);
  EXPECT_EQ(limit.counted_in_flight(now), 0);
}

TEST(OriginLimitOverdue, TheThresholdFollowsTheBestLatencyWithAFloor) {
  auto now = clock::time_point{} + 1000s;
  origin_limit limit(config(), now);
  EXPECT_EQ(limit.overdue_after(), std::chrono::duration_cast<clock::duration>(1s));
  limit.on_latency(200ms, now);
  EXPECT_EQ(limit.overdue_after(), std::chrono::duration_cast<clock::duration>(2s));  // 10x
  limit.on_latency(2ms, now);
  EXPECT_EQ(limit.overdue_after(), std::chrono::duration_cast<clock::duration>(250ms));
  // With 2 ms answers, an attempt 300 ms old no longer counts; one 100 ms old does.
  const auto old_one = limit.on_start(now);
  const auto recent = limit.on_start(now + 200ms);
  EXPECT_EQ(limit.counted_in_flight(now + 300ms), 1);
  limit.on_end(old_one);
  limit.on_end(recent);
  EXPECT_EQ(limit.counted_in_flight(now + 300ms), 0);
}

TEST(OriginLimitOverdue, AttemptsWithinTheThresholdKeepCounting) {
  auto now = clock::time_point{} + 1000s;
  origin_limit limit(config(), now);
  limit.on_latency(20ms, now);  // overdue after 250 ms
  for (int i = 0; i < 10; ++i) limit.on_start(now + std::chrono::milliseconds(10 * i));
  EXPECT_EQ(limit.counted_in_flight(now + 200ms), 10);
  EXPECT_EQ(limit.counted_in_flight(now + 500ms), 0);
}

TEST(OriginLimitOverdue, StartsOutOfOrderAndEndsInAnyOrderAreCounted) {
  auto now = clock::time_point{} + 1000s;
  origin_limit limit(config(), now);
  limit.on_latency(2ms, now);  // overdue after 250 ms
  // Shards pass the time they read; a start may carry an earlier time than the one before it.
  const auto late = limit.on_start(now + 400ms);
  const auto early = limit.on_start(now);
  const auto middle = limit.on_start(now + 200ms);
  const auto early_again = limit.on_start(now + 10ms);
  EXPECT_EQ(limit.counted_in_flight(now + 400ms), 2);  // the two from 200 and 400 ms
  EXPECT_EQ(limit.next_recount_at(now + 400ms), clock::time_point{} + 1000s + 250ms + 250ms);
  limit.on_end(middle);
  limit.on_end(early);
  EXPECT_EQ(limit.counted_in_flight(now + 400ms), 1);
  limit.on_end(late);
  limit.on_end(early_again);
  EXPECT_EQ(limit.counted_in_flight(now + 400ms), 0);
  EXPECT_EQ(limit.next_recount_at(now + 400ms), clock::time_point::max());
}

}  // namespace
}  // namespace surge::engine
