// The outcomes waiting to be written (engine/storage_thread/pending_outcomes.hpp): when they are
// due, what another session held locked, and what a run that fails gives back.
#include "engine/storage_thread/pending_outcomes.hpp"

#include <chrono>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "tests/engine/storage_thread/outcome_fixtures.hpp"

namespace surge::engine {
namespace {

using namespace std::chrono_literals;
using clock = pending_outcomes::clock;

const auto t0 = clock::time_point{} + 1000s;

std::vector<storage::outcome> outcomes(int first, int count) {
  return testing::numbered_outcomes(count, first);
}

using testing::ids;

TEST(PendingOutcomes, DueByTheIntervalSinceTheLastCommitOrByTheirNumber) {
  pending_outcomes pending({.interval = 100ms, .rows = 4});
  pending.submitted(outcomes(1, 2), {});
  pending.written_with_claim({}, t0);  // a claim carried the last ones at t0
  pending.submitted(outcomes(3, 2), {});
  EXPECT_FALSE(pending.due(t0 + 50ms, false));
  EXPECT_TRUE(pending.due(t0 + 50ms, true));
  EXPECT_TRUE(pending.due(t0 + 100ms, false));
  EXPECT_TRUE(pending.due_with(2));  // 2 more make the 4 of a batch
  EXPECT_FALSE(pending.due_with(1));
}

TEST(PendingOutcomes, RowsAnotherSessionHeldWaitWithTheirDeactivationsForALaterWrite) {
  pending_outcomes pending({.interval = 100ms, .rows = 10});
  pending.submitted(outcomes(1, 3), {7});
  storage::write_report report;
  report.held_rows = {2};
  report.held_subscribers = {7};
  EXPECT_TRUE(pending.written_with_claim(report, t0));
  EXPECT_EQ(ids(pending.outcomes()), std::vector<std::int64_t>{2});
  EXPECT_EQ(pending.deactivate(), std::vector<std::int64_t>{7});
  EXPECT_FALSE(pending.written_with_claim({}, t0 + 1s));
  EXPECT_TRUE(pending.empty());
  EXPECT_TRUE(pending.deactivate().empty());
}

TEST(PendingOutcomes, ARunWritesInBatchesAndKeepsWhatWasHeldForTheNext) {
  pending_outcomes pending({.interval = 100ms, .rows = 2});
  pending.submitted(outcomes(1, 3), {});
  pending.start_run(t0);
  auto batch = pending.next_batch();
  ASSERT_TRUE(batch);
  EXPECT_EQ(ids(batch->outcomes), (std::vector<std::int64_t>{1, 2}));
  storage::write_report report;
  report.held_rows = {1};
  EXPECT_TRUE(pending.batch_written(report));
  batch = pending.next_batch();
  ASSERT_TRUE(batch);
  EXPECT_EQ(ids(batch->outcomes), std::vector<std::int64_t>{3});
  EXPECT_FALSE(pending.batch_written({}));
  EXPECT_FALSE(pending.next_batch());  // the run is over
  EXPECT_FALSE(pending.running());
  EXPECT_EQ(ids(pending.outcomes()), std::vector<std::int64_t>{1});
  EXPECT_FALSE(pending.due(t0 + 50ms, false));  // the run's start counts as the last commit
}

TEST(PendingOutcomes, AFailedRunGivesBackWhatItDidNotCommit) {
  pending_outcomes pending({.interval = 100ms, .rows = 2});
  pending.submitted(outcomes(1, 3), {9});
  pending.start_run(t0);
  ASSERT_TRUE(pending.next_batch());
  pending.batch_written({});
  ASSERT_TRUE(pending.next_batch());
  EXPECT_EQ(pending.run_failed(), t0);
  EXPECT_FALSE(pending.running());
  EXPECT_EQ(ids(pending.outcomes()), std::vector<std::int64_t>{3});
  EXPECT_DOUBLE_EQ(pending.last_lease(), 103.0);
}

}  // namespace
}  // namespace surge::engine
