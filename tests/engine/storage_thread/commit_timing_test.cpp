// When the storage thread commits the outcomes it holds (engine/storage_thread/commit_timing.hpp),
// with the time since the last commit passed in.
#include "engine/storage_thread/commit_timing.hpp"

#include <chrono>

#include <gtest/gtest.h>

namespace surge::engine {
namespace {

using namespace std::chrono_literals;

const commit_timing timing{.interval = 20ms, .rows = 1000};

TEST(CommitTiming, OutcomesWaitForTheIntervalWhileFewAreHeld) {
  // A claim cycle a few milliseconds after the last commit goes without them.
  EXPECT_FALSE(outcomes_due(timing, 300, false, 5ms));
  EXPECT_FALSE(outcomes_due(timing, 999, false, 19ms));
  EXPECT_TRUE(outcomes_due(timing, 1, false, 20ms));
  EXPECT_TRUE(outcomes_due(timing, 300, false, 45ms));
}

TEST(CommitTiming, ManyOutcomesAreWrittenAtOnce) {
  EXPECT_TRUE(outcomes_due(timing, 1000, false, 0ms));
  EXPECT_TRUE(outcomes_due(timing, 5000, false, 1ms));
}

TEST(CommitTiming, NothingHeldIsNothingToCommit) {
  EXPECT_FALSE(outcomes_due(timing, 0, false, 1h));
  EXPECT_FALSE(outcomes_due(timing, 0, false, 1h, true));
}

TEST(CommitTiming, DeactivationsRideOnTheSameClock) {
  // A subscriber turned off (a 410 Gone) is written with the outcomes, not on its own.
  EXPECT_FALSE(outcomes_due(timing, 0, true, 5ms));
  EXPECT_TRUE(outcomes_due(timing, 0, true, 20ms));
}

TEST(CommitTiming, AnEndingDrainWritesWhateverIsHeld) {
  EXPECT_TRUE(outcomes_due(timing, 3, false, 0ms, true));
  EXPECT_TRUE(outcomes_due(timing, 0, true, 0ms, true));
}

TEST(CommitTiming, AFreedOrderedKeyIsWrittenWithTheNextClaim) {
  // Its key's next row can be claimed only once this finish is written: waiting for the
  // interval would set one hot key's pace.
  EXPECT_FALSE(outcomes_due(timing, 1, false, 1ms));
  EXPECT_TRUE(outcomes_due(timing, 1, false, 1ms, false, true));
  EXPECT_FALSE(outcomes_due(timing, 0, false, 1ms, false, true));
}

}  // namespace
}  // namespace surge::engine
