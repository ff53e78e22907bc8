// One periodic check of the backlog (engine/storage_thread/backlog_check.hpp), on a simulated
// clock: the sweep before the end, the count again after it, and --until-drained said once.
#include "engine/storage_thread/backlog_check.hpp"

#include <chrono>

#include <gtest/gtest.h>

namespace surge::engine {
namespace {

using namespace std::chrono_literals;
using then = backlog_check::then;

const auto start = std::chrono::steady_clock::time_point{} + 1000s;

// One check at `now` that finds `outstanding` rows, with the shards idle.
then check(backlog_check& backlog, std::chrono::steady_clock::time_point now,
           std::int64_t outstanding, std::optional<double> earliest_in = std::nullopt) {
  backlog.counting(0);
  return backlog.counted(now, outstanding, earliest_in, true, 0);
}

TEST(BacklogCheck, AQuietDrainSweepsCountsAgainAndIsDrainedOnce) {
  backlog_check backlog(30s, 0ms, true);
  backlog.begin(start);
  EXPECT_EQ(backlog.estimate(0), -1);  // no count yet
  EXPECT_EQ(check(backlog, start + 1s, 0), then::nothing);
  // The shards settled: the sweep comes before anything ends.
  EXPECT_EQ(check(backlog, start + 2s, 0), then::sweep);
  EXPECT_TRUE(backlog.swept());
  EXPECT_TRUE(backlog.recounting());
  EXPECT_EQ(backlog.counted(start + 2s, 0, std::nullopt, true, 0), then::drained);
  EXPECT_FALSE(backlog.recounting());
  // Said once.
  EXPECT_EQ(check(backlog, start + 3s, 0), then::nothing);
}

TEST(BacklogCheck, WithoutUntilDrainedNothingEnds) {
  backlog_check backlog(30s, 0ms, false);
  backlog.begin(start);
  for (int i = 1; i <= 5; ++i) {
    const auto next = check(backlog, start + i * 1s, 0);
    if (next == then::sweep) {
      EXPECT_TRUE(backlog.swept());
    }
    EXPECT_NE(next, then::drained);
  }
}

TEST(BacklogCheck, RetriesDueWithinTheWaitKeepTheDrainGoing) {
  backlog_check backlog(30s, 60s, true);
  backlog.begin(start);
  for (int i = 1; i <= 5; ++i) {
    const auto next = check(backlog, start + i * 1s, 0, 10.0);
    if (next == then::sweep) {
      EXPECT_TRUE(backlog.swept());
      EXPECT_EQ(backlog.counted(start + i * 1s, 0, 10.0, true, 0), then::nothing);
    }
    EXPECT_NE(next, then::drained);
  }
}

TEST(BacklogCheck, TheEstimateFollowsTheRowsFinishedSinceTheCount) {
  backlog_check backlog(30s, 0ms, true);
  backlog.begin(start);
  backlog.handed_out(10);  // the shards had work: no sweep
  backlog.counting(100);
  EXPECT_EQ(backlog.counted(start + 1s, 50, std::nullopt, false, 100), then::nothing);
  EXPECT_EQ(backlog.estimate(120), 30);
  EXPECT_EQ(backlog.estimate(200), 0);
}

TEST(BacklogCheck, TheReloadSweepsAtTheIntervalAndNoCountFollows) {
  backlog_check backlog(30s, 0ms, true);
  backlog.begin(start);
  EXPECT_FALSE(backlog.periodic_sweep(start + 29s));
  EXPECT_TRUE(backlog.periodic_sweep(start + 30s));
  EXPECT_FALSE(backlog.periodic_sweep(start + 31s));
  EXPECT_FALSE(backlog.swept());
  EXPECT_FALSE(backlog.sweep_failed());
}

TEST(BacklogCheck, AFailedSweepOfACheckEndsThatCheck) {
  backlog_check backlog(30s, 0ms, true);
  backlog.begin(start);
  (void)check(backlog, start + 1s, 5);
  ASSERT_EQ(check(backlog, start + 2s, 5), then::sweep);
  EXPECT_TRUE(backlog.sweep_failed());
  EXPECT_FALSE(backlog.swept());
  EXPECT_FALSE(backlog.recounting());
}

}  // namespace
}  // namespace surge::engine
