// When a subscriber's next request may go (engine/shard/subscriber_limits.hpp): the partner's
// announced quota lowers the limit until its window resets and is handed over once per
// announcement, a pause is only ever extended, a token is taken from the admission bucket and
// the lease together or from neither, and pushback's lower pace outlives a reload. On a
// simulated clock.
#include "engine/shard/subscriber_limits.hpp"

#include <gtest/gtest.h>

#include <string>

namespace surge::engine {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
using wall = std::chrono::system_clock;

class SubscriberLimits : public ::testing::Test {
 protected:
  static storage::subscriber_row row_of(double rate, std::int64_t burst, double tokens) {
    storage::subscriber_row row;
    row.id = 7;
    row.rate_per_sec = rate;
    row.burst = burst;
    row.tokens = tokens;
    row.tokens_updated_at = now_unix;
    return row;
  }
  subscriber_limits make(double rate, std::int64_t burst, double tokens) {
    return subscriber_limits(row_of(rate, burst, tokens), rate, static_cast<double>(burst), t0,
                             now_unix, scheduler_config{});
  }
  // An X-RateLimit announcement: `limit` per window, `remaining` left, the reset `reset` s away.
  static quota_lines announce(int limit, int remaining, int reset) {
    return {{proto::quota_field::x_limit, std::to_string(limit)},
            {proto::quota_field::x_remaining, std::to_string(remaining)},
            {proto::quota_field::x_reset, std::to_string(reset)}};
  }
  // Grants the lease `tokens`, as the storage thread's answer would.
  static void lease(subscriber_limits& limits, double tokens, steady::time_point now) {
    limits.allowance().ask(50.0, now);
    limits.allowance().granted(tokens, now, 0s, false);
  }

  static constexpr double now_unix = 1'800'000'000.0;
  const steady::time_point t0 = steady::time_point{} + 1000s;
  const wall::time_point said_at = wall::time_point{} + std::chrono::seconds(1'800'000'000);
};

TEST_F(SubscriberLimits, AQuotaBelowTheLimitLowersTheGateUntilItsWindowResets) {
  auto limits = make(50.0, 5, 5);
  const auto step = limits.on_announced(announce(20, 10, 2), 0, std::nullopt, said_at, t0);
  ASSERT_TRUE(step);
  EXPECT_EQ(step->kind, proto::pace_kind::reduced);
  EXPECT_TRUE(step->gate_changed);
  EXPECT_TRUE(step->first_below_configured);
  ASSERT_TRUE(limits.announced_until());
  EXPECT_EQ(*limits.announced_until(), t0 + 2s);
  EXPECT_LT(limits.bucket().rate(), 50.0);
  EXPECT_TRUE(limits.announced(said_at)->paced);

  EXPECT_FALSE(limits.expire_announced(t0 + 1s));
  EXPECT_LT(limits.bucket().rate(), 50.0);
  EXPECT_TRUE(limits.expire_announced(t0 + 2s));
  EXPECT_FALSE(limits.announced_until());
  EXPECT_EQ(limits.bucket().rate(), 50.0);

  // The log says it once per drain, not every window.
  const auto again =
      limits.on_announced(announce(20, 10, 2), 0, std::nullopt, said_at + 2s, t0 + 2s);
  ASSERT_TRUE(again);
  EXPECT_FALSE(again->first_below_configured);
}

TEST_F(SubscriberLimits, AQuotaThatFitsChangesNothingAndOneSpentAsksForAPause) {
  auto limits = make(5.0, 5, 5);
  const auto fits = limits.on_announced(announce(1000, 900, 10), 0, std::nullopt, said_at, t0);
  ASSERT_TRUE(fits);
  EXPECT_EQ(fits->kind, proto::pace_kind::configured);
  EXPECT_FALSE(fits->gate_changed);
  EXPECT_FALSE(fits->first_below_configured);
  EXPECT_EQ(limits.bucket().rate(), 5.0);

  const auto spent = limits.on_announced(announce(1000, 0, 3), 0, std::nullopt, said_at, t0);
  ASSERT_TRUE(spent);
  EXPECT_EQ(spent->kind, proto::pace_kind::paused);
  EXPECT_EQ(spent->until, t0 + 3s);
  // The pause is the caller's to set; no lower limit is left behind for after it.
  EXPECT_FALSE(limits.announced_until());
  EXPECT_FALSE(limits.paused(t0));

  EXPECT_FALSE(limits.on_announced({}, 0, std::nullopt, said_at, t0));
}

TEST_F(SubscriberLimits, EachAnnouncementIsHandedOverOnce) {
  auto limits = make(50.0, 5, 5);
  EXPECT_FALSE(limits.take_unrecorded(7));
  limits.on_announced(announce(20, 10, 2), 0, std::nullopt, said_at, t0);
  const auto row = limits.take_unrecorded(7);
  ASSERT_TRUE(row);
  EXPECT_EQ(row->subscriber_id, 7);
  EXPECT_EQ(row->form, "x-ratelimit");
  EXPECT_EQ(row->quota, 20);
  EXPECT_EQ(row->remaining, 10);
  EXPECT_LT(row->paced_rate, 50.0);
  EXPECT_FALSE(limits.take_unrecorded(7));
  limits.on_announced(announce(20, 9, 2), 0, std::nullopt, said_at, t0);
  EXPECT_TRUE(limits.take_unrecorded(7));
}

TEST_F(SubscriberLimits, APauseIsExtendedNeverShortened) {
  auto limits = make(5.0, 5, 5);
  limits.pause(t0 + 10s, "first");
  limits.pause(t0 + 5s, "shorter");
  EXPECT_EQ(limits.paused_until(), t0 + 10s);
  EXPECT_EQ(limits.pause_reason(), "first");
  EXPECT_TRUE(limits.paused(t0 + 9s));
  EXPECT_FALSE(limits.paused(t0 + 10s));
  EXPECT_TRUE(limits.stopped(t0 + 9s));
  EXPECT_FALSE(limits.stopped(t0 + 10s));
  // A rate of 0 in the table stops it as a pause would, with no end.
  EXPECT_TRUE(make(0.0, 5, 5).stopped(t0 + 1000s));
  limits.pause(t0 + 20s, "longer");
  EXPECT_EQ(limits.paused_until(), t0 + 20s);
  EXPECT_EQ(limits.pause_reason(), "longer");
  // The wire line sees the same pause.
  EXPECT_EQ(limits.gate(false).paused_until, t0 + 20s);
}

TEST_F(SubscriberLimits, ATokenIsTakenFromTheBucketAndTheLeaseTogetherOrFromNeither) {
  auto limits = make(5.0, 5, 5);
  // No lease yet: nothing is taken from the bucket either.
  EXPECT_FALSE(limits.admit(t0));
  EXPECT_DOUBLE_EQ(limits.bucket().tokens_at(t0), 5.0);
  EXPECT_EQ(limits.token_wait(t0), steady::duration::max());

  lease(limits, 2, t0);
  EXPECT_EQ(limits.token_wait(t0), steady::duration::zero());
  EXPECT_TRUE(limits.admit(t0));
  EXPECT_TRUE(limits.admit(t0));
  EXPECT_DOUBLE_EQ(limits.bucket().tokens_at(t0), 3.0);
  EXPECT_FALSE(limits.admit(t0));  // the lease is spent
  EXPECT_DOUBLE_EQ(limits.bucket().tokens_at(t0), 3.0);

  // An empty bucket takes nothing from the lease.
  auto empty = make(5.0, 5, 0);
  lease(empty, 3, t0);
  EXPECT_FALSE(empty.admit(t0));
  EXPECT_DOUBLE_EQ(empty.allowance().tokens(), 3.0);
  EXPECT_NEAR(std::chrono::duration<double>(empty.token_wait(t0)).count(), 0.2, 1e-6);
}

TEST_F(SubscriberLimits, APaceLoweredByPushbackOutlivesAReloadWithinTheNewLimit) {
  auto limits = make(50.0, 5, 5);
  EXPECT_FALSE(limits.slowed());
  limits.on_endpoint(true, false, t0);
  ASSERT_TRUE(limits.slowed());
  const double lowered = limits.bucket().rate();
  EXPECT_LT(lowered, 50.0);
  limits.configure(50.0, 5, t0);
  EXPECT_TRUE(limits.slowed());
  EXPECT_DOUBLE_EQ(limits.bucket().rate(), lowered);
  // A new limit below the lowered pace is the pace now.
  limits.configure(lowered / 2, 5, t0);
  EXPECT_DOUBLE_EQ(limits.bucket().rate(), lowered / 2);
  EXPECT_EQ(limits.gate(false).wire.rate(), lowered / 2);
}

TEST_F(SubscriberLimits, TakenOverItStartsWithEmptyBuckets) {
  auto limits = make(5.0, 5, 5);
  limits.taken_over(t0);
  EXPECT_DOUBLE_EQ(limits.bucket().tokens_at(t0), 0.0);
  EXPECT_GE(limits.gate(false).wire.try_pass(t0, false), 200ms - 1us);
}

}  // namespace
}  // namespace surge::engine
