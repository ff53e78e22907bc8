// What an attempt's answer means, without a shard: hear_response (what it says of the
// subscriber) and settle_answer (its rows' outcomes and what it asks of the subscriber).
#include "engine/shard/subscriber_response.hpp"

#include <chrono>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "engine/subscriber_settings.hpp"
#include "tests/engine/recorded_log.hpp"
#include "tests/engine/shard/attempt_fixtures.hpp"

namespace surge::engine {
namespace {

using namespace std::chrono_literals;
using testing::answered;
using testing::times_at;
using clock = std::chrono::steady_clock;

class SubscriberResponse : public ::testing::Test {
 protected:
  const clock::time_point t0 = clock::time_point{} + 1h;

  subscriber_state& make(std::optional<proto::order_rule> order = std::nullopt) {
    storage::subscriber_row row;
    row.id = 7;
    row.url = "http://partner.test/hook";
    row.secret = "secret";
    row.order = std::move(order);
    sub_ = std::make_unique<subscriber_state>(row, derive_settings(row, config_), t0, 1e9, config_);
    return *sub_;
  }

  static storage::claimed_row row(std::int64_t id) {
    storage::claimed_row r;
    r.id = id;
    r.subscriber_id = 7;
    r.payload = "{}";
    r.created_at = 1'699'999'990;
    r.lease = 1'700'000'060;
    return r;
  }

  response_effects hear(subscriber_state& sub, const http_result& result) {
    const std::vector<storage::claimed_row> rows{row(1)};
    return hear_response(sub, rows, result, times_at(1'700'000'000), t0,
                         {.metrics = metrics_, .log = log_, .retry_after_cap = 1h});
  }

  settled_answer settle(subscriber_state& sub, const http_result& result,
                        storage::claimed_row sent = row(1)) {
    const std::vector<storage::claimed_row> rows{std::move(sent)};
    return settle_answer(sub, rows, false, result, times_at(1'700'000'000),
                         {.policy = policy_,
                          .retry_after_cap = 1h,
                          .pause_release_threshold = config_.pause_release_threshold},
                         0.5, outcomes_);
  }

  scheduler_config config_;
  proto::retry_policy policy_;
  drain_metrics metrics_{1};
  testing::recorded_log log_;
  std::unique_ptr<subscriber_state> sub_;
  std::vector<storage::outcome> outcomes_;
};

TEST_F(SubscriberResponse, TheCircuitOpensOnceAtItsThresholdAndSaysSo) {
  auto& sub = make();
  for (int i = 1; i < config_.circuit.failure_threshold; ++i) {
    EXPECT_FALSE(hear(sub, answered(500)).circuit_opened) << i;
  }
  EXPECT_TRUE(hear(sub, answered(500)).circuit_opened);
  EXPECT_TRUE(log_.says("circuit open after 10 failures"));
  EXPECT_FALSE(hear(sub, answered(500)).circuit_opened);  // open already
  EXPECT_EQ(sub.failed_attempts, config_.circuit.failure_threshold + 1);
  EXPECT_EQ(metrics_.counters.attempts.load(), config_.circuit.failure_threshold + 1);
}

TEST_F(SubscriberResponse, ADeliveryCountsItsRowsAndEndsTheFailureStreak) {
  auto& sub = make();
  hear(sub, answered(500));
  hear(sub, answered(204));
  EXPECT_EQ(sub.delivered, 1);
  EXPECT_EQ(sub.consecutive_failures, 0);
}

TEST_F(SubscriberResponse, ASpentAnnouncedQuotaPausesTheSubscriberUntilItsReset) {
  auto& sub = make();
  sub.in_flight = 1;  // the attempt answered is still counted, as in the shard
  auto result = answered(204);
  result.quota = {{proto::quota_field::x_limit, "100"},
                  {proto::quota_field::x_remaining, "0"},
                  {proto::quota_field::x_reset, "30"}};
  const auto effects = hear(sub, result);
  ASSERT_TRUE(effects.paused_until);
  EXPECT_GE(*effects.paused_until, t0 + 29s);
  EXPECT_LE(*effects.paused_until, t0 + 31s);
}

TEST_F(SubscriberResponse, GoneDeactivatesAndAnOrderedRowFreesItsKeyThoughOthersAreReady) {
  auto& sub = make(proto::order_rule{});
  sub.ready.push_back(row(2));  // released with the deactivation, so none is left to send
  const auto settled = settle(sub, answered(410));
  EXPECT_TRUE(settled.deactivate);
  EXPECT_TRUE(settled.frees_key);
  ASSERT_EQ(outcomes_.size(), 1u);
  EXPECT_EQ(outcomes_[0].kind, storage::outcome_kind::dead);
  EXPECT_TRUE(outcomes_[0].frees_key);
}

TEST_F(SubscriberResponse, ARowThatDiesUnderALongPauseFreesItsKeyThoughOthersAreReady) {
  auto& sub = make(proto::order_rule{});
  sub.ready.push_back(row(2));  // rescheduled after the pause, so none is left to send
  auto old = row(1);
  old.created_at = 1'700'000'000 - (24 * 3600 - 10);  // 20 s more would pass its retry window
  const auto settled = settle(sub, answered(429, "20"), old);
  ASSERT_TRUE(settled.pause);
  EXPECT_GE(*settled.pause, config_.pause_release_threshold);
  EXPECT_EQ(outcomes_.at(0).kind, storage::outcome_kind::dead);
  EXPECT_TRUE(settled.frees_key);
  EXPECT_TRUE(outcomes_[0].frees_key);
  outcomes_.clear();
  // A short pause leaves the ready rows where they are: they go first.
  EXPECT_FALSE(settle(sub, answered(429, "1"), old).frees_key);
}

TEST_F(SubscriberResponse, AnOrderedRowWithOthersReadyLeavesItsKeyToTheUsualCadence) {
  auto& sub = make(proto::order_rule{});
  sub.ready.push_back(row(2));
  EXPECT_FALSE(settle(sub, answered(204)).frees_key);
  EXPECT_FALSE(outcomes_.at(0).frees_key);
  sub.ready.clear();
  EXPECT_TRUE(settle(sub, answered(204)).frees_key);
  EXPECT_FALSE(settle(sub, answered(500)).frees_key);  // a retry keeps the key where it is
}

TEST_F(SubscriberResponse, RetryAfterPausesAndIsRecordedAsTheLastError) {
  auto& sub = make();
  const auto settled = settle(sub, answered(429, "20"));
  ASSERT_TRUE(settled.pause);
  EXPECT_EQ(*settled.pause, 20s);
  EXPECT_FALSE(sub.last_error.empty());
  EXPECT_EQ(outcomes_.at(0).kind, storage::outcome_kind::retry);
}

}  // namespace
}  // namespace surge::engine
