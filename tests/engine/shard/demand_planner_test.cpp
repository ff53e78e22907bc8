// The shard's demand planner on its own, with the clock passed in: which subscribers a claim asks
// rows for, in what turn, and when a subscriber whose claims come back short is polled again.
#include "engine/shard/demand_planner.hpp"

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include <gtest/gtest.h>

#include "engine/subscriber_settings.hpp"

namespace surge::engine {
namespace {

using namespace std::chrono_literals;
using clock = demand_planner::clock;

class DemandPlanner : public ::testing::Test {
 protected:
  const clock::time_point t0 = clock::time_point{} + 1h;

  subscriber_state& add(std::int64_t id) {
    storage::subscriber_row row;
    row.id = id;
    row.url = "https://partner.example/hook";
    row.secret = "secret";
    row.rate_per_sec = 5;
    row.burst = 10;
    auto state =
        std::make_unique<subscriber_state>(row, derive_settings(row, config_), t0, 1e9, config_);
    auto& sub = *state;
    subscribers_.emplace(id, std::move(state));
    planner().add(sub);
    return sub;
  }

  // Made at first use, so that a test may change config_ before.
  demand_planner& planner() {
    if (!planner_) planner_.emplace(config_, subscribers_);
    return *planner_;
  }

  // The rows each subscriber is asked for (token-only entries left out).
  std::map<std::int64_t, int> plan(int row_room, clock::time_point now) {
    last_ = planner().plan(row_room, memory_, now);
    std::map<std::int64_t, int> rows;
    for (const auto& demand : last_) {
      if (demand.rows > 0) rows[demand.subscriber_id] = demand.rows;
    }
    return rows;
  }

  // The storage thread answers the last plan with no rows; `more_due`: those it says have more.
  void answer_empty(clock::time_point now, std::vector<std::int64_t> more_due = {}) {
    claim_reply reply{.asked = last_, .more_due = std::move(more_due)};
    planner().answered(reply, memory_);
    std::vector<subscriber_state*> got_rows;
    planner().settle_polls(reply, now, got_rows);
    EXPECT_TRUE(got_rows.empty());
  }

  scheduler_config config_;
  subscriber_map subscribers_;
  std::optional<demand_planner> planner_;
  payload_memory memory_{1e9, 1 << 20};
  std::vector<storage::subscriber_demand> last_;
};

TEST_F(DemandPlanner, ASubscriberWhoseClaimsComeBackShortIsPolledLessOftenUntilRowsArrive) {
  ASSERT_EQ(config_.idle_poll_min, 100ms);
  ASSERT_EQ(config_.idle_poll_max, 500ms);
  auto& sub = add(1);
  auto now = t0;
  ASSERT_TRUE(plan(1000, now).contains(1));
  // Each short answer doubles the wait before the next poll, from the minimum to the maximum.
  for (const auto wait : {100ms, 200ms, 400ms, 500ms, 500ms}) {
    answer_empty(now);
    EXPECT_FALSE(plan(1000, now + wait - 1ms).contains(1))
        << "polled before its " << wait.count() << " ms";
    now += wait;
    EXPECT_TRUE(plan(1000, now).contains(1)) << "not polled after its " << wait.count() << " ms";
  }
  // New rows end the backoff: it is asked for at once.
  answer_empty(now);
  planner().poll_now(sub, now + 1ms);
  EXPECT_TRUE(plan(1000, now + 1ms).contains(1));
  EXPECT_EQ(sub.idle_poll, 0ms);
}

TEST_F(DemandPlanner, AShortAnswerWithMoreDueStartsNoBackoff) {
  add(1);
  ASSERT_TRUE(plan(1000, t0).contains(1));
  answer_empty(t0, {1});
  EXPECT_TRUE(plan(1000, t0).contains(1));
}

TEST_F(DemandPlanner, TheScanStartsWhereTheLastRowBudgetRanOut) {
  add(1);
  add(2);
  add(3);
  // Room for one subscriber's rows a claim: each claim goes to the next in turn.
  std::vector<std::int64_t> turns;
  for (int claim = 0; claim < 4; ++claim) {
    const auto rows = plan(5, t0);
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_EQ(rows.begin()->second, 5);
    turns.push_back(rows.begin()->first);
    answer_empty(t0, {1, 2, 3});
  }
  EXPECT_EQ(turns, (std::vector<std::int64_t>{1, 2, 3, 1}));
}

TEST_F(DemandPlanner, OneClaimIsOutstandingAtATime) {
  add(1);
  add(2);
  ASSERT_FALSE(plan(5, t0).empty());
  EXPECT_TRUE(planner().outstanding());
  EXPECT_TRUE(planner().plan(1000, memory_, t0).empty()) << "a second claim before the answer";
  EXPECT_EQ(planner().pending_rows(), 5);
  answer_empty(t0, {1, 2});
  EXPECT_FALSE(planner().outstanding());
  EXPECT_EQ(planner().pending_rows(), 0);
  EXPECT_FALSE(plan(1000, t0).empty());
}

TEST_F(DemandPlanner, APausedSubscriberIsNotPolledBeforeItsPauseEnds) {
  auto& sub = add(1);
  planner().poll_no_earlier(sub, t0 + 2s);
  EXPECT_TRUE(plan(1000, t0 + 1s).empty());
  EXPECT_TRUE(plan(1000, t0 + 2s).contains(1));
}

TEST_F(DemandPlanner, GrantsGoToTheSubscribersStillThere) {
  auto& sub = add(1);
  ASSERT_TRUE(plan(1000, t0).contains(1));
  claim_reply reply{
      .asked = last_,
      .granted = {{.subscriber_id = 1, .tokens = 3}, {.subscriber_id = 9, .tokens = 4}}};
  planner().answered(reply, memory_);
  std::vector<subscriber_state*> granted;
  planner().take_grants(reply, t0, 1e9, granted);
  ASSERT_EQ(granted, std::vector<subscriber_state*>{&sub});
  EXPECT_EQ(sub.limits.allowance().tokens(), 3);
}

}  // namespace
}  // namespace surge::engine

namespace surge::engine {
namespace {

// Once its row is claimed, nothing makes the demand scan visit a subscriber polled once an hour:
// only the token watch, which keeps whoever holds tokens, can give back what it left unspent.
TEST_F(DemandPlanner, TokensLeftUnspentForALeaseGoBackThoughTheSubscriberIsNotPolled) {
  config_.idle_poll_min = config_.idle_poll_max = std::chrono::hours(1);
  auto& sub = add(1);
  ASSERT_TRUE(plan(1000, t0).contains(1));
  claim_reply reply{.asked = last_, .granted = {{.subscriber_id = 1, .tokens = 5}}};
  planner().answered(reply, memory_);
  std::vector<subscriber_state*> woken;
  planner().take_grants(reply, t0, 1e9, woken);
  planner().settle_polls(reply, t0, woken);  // short: not polled again for an hour
  ASSERT_EQ(sub.limits.allowance().tokens(), 5);
  sub.limits.allowance().spend(t0 + 600ms);  // the one row goes

  const auto given_back = [&](clock::time_point now) {
    for (const auto& demand : planner().plan(1000, memory_, now)) {
      EXPECT_NE(demand.rows > 0, true) << "polled at " << (now - t0).count();
      if (demand.subscriber_id == 1 && demand.tokens < 0) return -demand.tokens;
    }
    return 0.0;
  };
  EXPECT_EQ(given_back(t0 + 1500ms), 0) << "used 0.9 s ago: not yet a whole lease";
  EXPECT_EQ(given_back(t0 + 1700ms), 4);
}

}  // namespace
}  // namespace surge::engine
