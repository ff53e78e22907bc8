// One run of writing held outcomes in batches (engine/storage_thread/outcome_batches.hpp): the
// batches' sizes, a refused row found by halving and settled, and what a failed run gives back.
#include "engine/storage_thread/outcome_batches.hpp"

#include <chrono>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "tests/engine/storage_thread/outcome_fixtures.hpp"

namespace surge::engine {
namespace {

using namespace std::chrono_literals;
using kind = outcome_batches::refusal::kind;

const auto began = std::chrono::steady_clock::time_point{} + 1000s;

std::vector<storage::outcome> outcomes(int count) { return testing::numbered_outcomes(count); }

using testing::ids;

TEST(OutcomeBatches, WritesInBatchesWithTheDeactivationsInTheFirst) {
  const auto pending = outcomes(5);
  outcome_batches run(2, {42}, began);
  auto batch = run.next(pending);
  ASSERT_TRUE(batch);
  EXPECT_EQ(ids(batch->outcomes), (std::vector<std::int64_t>{1, 2}));
  EXPECT_EQ(batch->deactivate.size(), 1U);
  EXPECT_EQ(ids(run.written(pending)), (std::vector<std::int64_t>{1, 2}));
  batch = run.next(pending);
  EXPECT_EQ(ids(batch->outcomes), (std::vector<std::int64_t>{3, 4}));
  EXPECT_TRUE(batch->deactivate.empty());
  (void)run.written(pending);
  EXPECT_EQ(ids(run.next(pending)->outcomes), (std::vector<std::int64_t>{5}));
  (void)run.written(pending);
  EXPECT_FALSE(run.next(pending));
}

TEST(OutcomeBatches, ARefusedBatchIsHalvedUntilTheRowIsAloneThenDeadLettered) {
  const auto pending = outcomes(8);
  outcome_batches run(8, {}, began);
  // Row 3 is refused: 8 -> 4 -> 2 -> 1.
  EXPECT_EQ(run.next(pending)->outcomes.size(), 8U);
  EXPECT_EQ(run.refused(pending, "no").what, kind::smaller_batch);
  EXPECT_EQ(ids(run.next(pending)->outcomes), (std::vector<std::int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(run.refused(pending, "no").what, kind::smaller_batch);
  EXPECT_EQ(ids(run.next(pending)->outcomes), (std::vector<std::int64_t>{1, 2}));
  (void)run.written(pending);
  EXPECT_EQ(ids(run.next(pending)->outcomes), (std::vector<std::int64_t>{3, 4}));
  EXPECT_EQ(run.refused(pending, "no").what, kind::smaller_batch);
  EXPECT_EQ(ids(run.next(pending)->outcomes), (std::vector<std::int64_t>{3}));
  const auto refusal = run.refused(pending, "CHECK failed");
  EXPECT_EQ(refusal.what, kind::dead_letter);
  EXPECT_EQ(refusal.delivery_id, 3);
  // Its dead-letter is the next write, with the reason, on the same lease.
  ASSERT_NE(run.settling(), nullptr);
  const auto dead = run.next(pending)->outcomes;
  ASSERT_EQ(dead.size(), 1U);
  EXPECT_EQ(dead[0].kind, storage::outcome_kind::dead);
  EXPECT_EQ(dead[0].lease, 103.0);
  EXPECT_EQ(dead[0].last_error, run.settle_reason());
  EXPECT_NE(run.settle_reason().find("CHECK failed"), std::string::npos);
  run.settled();
  EXPECT_EQ(run.settling(), nullptr);
  // The others go on in full batches.
  EXPECT_EQ(ids(run.next(pending)->outcomes), (std::vector<std::int64_t>{4, 5, 6, 7, 8}));
}

TEST(OutcomeBatches, ARefusedDeadLetterIsQuarantinedAtOnce) {
  auto pending = outcomes(1);
  pending[0].kind = storage::outcome_kind::dead;
  outcome_batches run(8, {}, began);
  (void)run.next(pending);
  const auto refusal = run.refused(pending, "no");
  EXPECT_EQ(refusal.what, kind::quarantine);
  EXPECT_EQ(refusal.delivery_id, 1);
  EXPECT_EQ(run.settling(), nullptr);
  EXPECT_FALSE(run.next(pending));
}

TEST(OutcomeBatches, RefusedDeactivationsAreTriedAloneThenDropped) {
  const auto pending = outcomes(2);
  outcome_batches run(8, {42}, began);
  (void)run.next(pending);
  EXPECT_EQ(run.refused(pending, "no").what, kind::smaller_batch);
  auto batch = run.next(pending);
  EXPECT_TRUE(batch->outcomes.empty());
  EXPECT_EQ(batch->deactivate.size(), 1U);
  EXPECT_EQ(run.refused(pending, "no").what, kind::deactivation_refused);
  batch = run.next(pending);
  EXPECT_EQ(ids(batch->outcomes), (std::vector<std::int64_t>{1, 2}));
  EXPECT_TRUE(batch->deactivate.empty());
}

TEST(OutcomeBatches, AFailedRunGivesBackOnlyWhatWasNotCommitted) {
  auto pending = outcomes(5);
  outcome_batches run(2, {42}, began);
  (void)run.next(pending);
  (void)run.written(pending);  // 1 and 2 committed; the deactivation with them
  (void)run.next(pending);
  run.held().push_back(pending[2]);  // row 3 locked by another session, as a report would say
  (void)run.written(pending);
  (void)run.next(pending);
  std::vector<std::int64_t> deactivate;
  EXPECT_TRUE(run.give_back(pending, deactivate));
  EXPECT_EQ(ids(pending), (std::vector<std::int64_t>{5, 3}));
  EXPECT_TRUE(deactivate.empty());

  auto untouched = outcomes(2);
  outcome_batches first(2, {42}, began);
  (void)first.next(untouched);
  EXPECT_FALSE(first.give_back(untouched, deactivate));
  EXPECT_EQ(untouched.size(), 2U);
  EXPECT_EQ(deactivate, (std::vector<std::int64_t>{42}));
}

TEST(OutcomeBatches, TheEndKeepsOnlyTheHeldOutcomes) {
  auto pending = outcomes(3);
  outcome_batches run(8, {}, began);
  (void)run.next(pending);
  run.held().push_back(pending[1]);
  (void)run.written(pending);
  EXPECT_FALSE(run.next(pending));
  run.end(pending);
  EXPECT_EQ(ids(pending), (std::vector<std::int64_t>{2}));
  EXPECT_EQ(run.began(), began);
}

}  // namespace
}  // namespace surge::engine
