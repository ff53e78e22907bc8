// One claim from the shards' asks to their answers (engine/storage_thread/claim_round.hpp).
#include "engine/storage_thread/claim_round.hpp"

#include <gtest/gtest.h>

#include "engine/handoff.hpp"

namespace surge::engine {
namespace {

using next = claim_round::next;
using clock = claim_round::clock;

const claim_conditions calm{};

TEST(ClaimRound, NothingToDoWithoutAnAskOrOnceClaimingStopped) {
  claim_round round(1);
  EXPECT_EQ(round.step(calm), next::nothing);
  round.asked(0, {{.subscriber_id = 1, .rows = 4}});
  EXPECT_EQ(round.step({.claiming = false}), next::nothing);
  EXPECT_TRUE(round.waiting());
}

TEST(ClaimRound, TheAsksOfEveryShardGoInOneCycle) {
  claim_round round(2);
  round.asked(1, {{.subscriber_id = 2, .rows = 3}});
  round.asked(0, {{.subscriber_id = 1, .rows = 4}, {.subscriber_id = 3, .rows = 1}});
  ASSERT_EQ(round.step(calm), next::run_cycle);
  ASSERT_EQ(round.demand().size(), 3u);
  EXPECT_EQ(round.demand()[0].subscriber_id, 2);
  EXPECT_EQ(round.demand()[2].subscriber_id, 3);
}

TEST(ClaimRound, MoreThanABatchOfOutcomesIsWrittenFirstThenTheClaimRuns) {
  claim_round round(1);
  round.asked(0, {{.subscriber_id = 1, .rows = 4}});
  EXPECT_EQ(round.step({.outcomes_over_one_batch = true}), next::write_outcomes_first);
  // The outcomes were written: the claim goes on, not the outcomes again.
  EXPECT_EQ(round.step({.outcomes_over_one_batch = true}), next::run_cycle);
}

TEST(ClaimRound, ABackoffOrALostQueueHoldsTheClaimAndItStartsOver) {
  claim_round round(1);
  round.asked(0, {{.subscriber_id = 1, .rows = 4}});
  EXPECT_EQ(round.step({.backing_off = true}), next::nothing);
  EXPECT_EQ(round.step({.outcomes_over_one_batch = true}), next::write_outcomes_first);
  // It began while the outcomes were written: the claim starts over, outcomes first again.
  EXPECT_EQ(round.step({.backing_off = true}), next::nothing);
  EXPECT_EQ(round.step({.outcomes_over_one_batch = true}), next::write_outcomes_first);
  EXPECT_EQ(round.step({.queue_lost = true}), next::nothing);
  EXPECT_EQ(round.step({.outcomes_over_one_batch = true}), next::write_outcomes_first);
  EXPECT_EQ(round.step(calm), next::run_cycle);
}

TEST(ClaimRound, AClaimIsTriedAgainOnceAtMostThenGivenUpEmpty) {
  claim_round round(1);
  round.asked(0, {{.subscriber_id = 1, .rows = 4}});
  ASSERT_EQ(round.step(calm), next::run_cycle);
  round.cycle_started(clock::time_point{} + std::chrono::seconds(1), true);
  EXPECT_TRUE(round.with_outcomes());
  EXPECT_EQ(round.started(), clock::time_point{} + std::chrono::seconds(1));
  // A refused row rolled the cycle back; its outcomes went on their own. Once more:
  ASSERT_EQ(round.step(calm), next::run_cycle);
  round.cycle_started(clock::time_point{} + std::chrono::seconds(2), false);
  EXPECT_FALSE(round.with_outcomes());
  EXPECT_EQ(round.step(calm), next::answer_empty);
  const auto answers = round.answer({}, {}, {});
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_TRUE(answers[0].reply.rows.empty());
  EXPECT_EQ(answers[0].reply.asked.at(0).subscriber_id, 1);
  EXPECT_FALSE(round.waiting());
}

TEST(ClaimRound, ARetryWaitsNotForABackoffOrALostQueue) {
  claim_round round(1);
  round.asked(0, {{.subscriber_id = 1, .rows = 4}});
  ASSERT_EQ(round.step(calm), next::run_cycle);
  round.cycle_started(clock::time_point{}, true);
  EXPECT_EQ(round.step({.backing_off = true}), next::answer_empty);
  EXPECT_EQ(round.step({.queue_lost = true}), next::answer_empty);
}

TEST(ClaimRound, AfterAStatementTimeoutTheNextClaimAsksForHalf) {
  claim_round round(1);
  round.asked(0, {{.subscriber_id = 1, .rows = 300}, {.subscriber_id = 2, .rows = 100}});
  ASSERT_EQ(round.step(calm), next::run_cycle);
  round.cycle_started(clock::time_point{}, false);
  round.timed_out();
  EXPECT_EQ(round.most_rows(), 200u);
  (void)round.answer({}, {}, {});
  round.asked(0, {{.subscriber_id = 1, .rows = 300}, {.subscriber_id = 2, .rows = 100}});
  ASSERT_EQ(round.step(calm), next::run_cycle);
  // Earlier entries first; the later one stays, with no rows (its tokens may still ride).
  ASSERT_EQ(round.demand().size(), 2u);
  EXPECT_EQ(round.demand()[0].rows, 200);
  EXPECT_EQ(round.demand()[1].rows, 0);
  round.cycle_started(clock::time_point{}, false);
  round.fitted();
  EXPECT_EQ(round.most_rows(), 400u);
}

TEST(ClaimRound, AStopAnswersEveryShardThatAskedWithItsOwnDemandAndNoRows) {
  claim_round round(2);
  round.asked(1, {{.subscriber_id = 2, .rows = 3}});
  round.asked(0, {{.subscriber_id = 1, .rows = 4}});
  ASSERT_EQ(round.step({.outcomes_over_one_batch = true}), next::write_outcomes_first);
  const auto answers = round.answer_stopped();
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_EQ(answers[0].shard, 1);
  EXPECT_EQ(answers[0].reply.asked.at(0).subscriber_id, 2);
  EXPECT_EQ(answers[1].shard, 0);
  EXPECT_TRUE(answers[1].reply.rows.empty());
  EXPECT_FALSE(round.waiting());
  EXPECT_EQ(round.step(calm), next::nothing);
  // The round starts over: a new ask has its outcomes written first again.
  round.asked(0, {{.subscriber_id = 1, .rows = 4}});
  EXPECT_EQ(round.step({.outcomes_over_one_batch = true}), next::write_outcomes_first);
}

}  // namespace
}  // namespace surge::engine
