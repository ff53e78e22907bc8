// The storage thread's end-of-work decisions (engine/storage_thread/backlog_watch.hpp), with a
// clock passed in: when the stuck-row sweep runs, when --until-drained stops, and how often the
// backlog is counted.
#include "engine/storage_thread/backlog_watch.hpp"

#include <chrono>

#include <gtest/gtest.h>

namespace surge::engine {
namespace {

using namespace std::chrono_literals;
using clock = backlog_watch::clock;

constexpr auto interval = 30s;
const clock::time_point start{1000s};

// One check of a drain that is still busy: rows claimed, some in flight.
void busy_check(backlog_watch& watch, std::int64_t& claimed) {
  claimed += 500;
  watch.observe(false, claimed);
}

TEST(BacklogWatch, NoSweepWhenTheShardsLookEmptyBetweenTwoClaims) {
  backlog_watch watch(interval, start);
  // Before the first claim nothing is in flight: one empty-looking check.
  watch.observe(true, 0);
  EXPECT_FALSE(watch.sweep_due(200000, start));
  // Two seconds later, mid-drain, a shard has just finished its last request and the next
  // claim's answer is on its way: the shards look empty again, but rows were claimed since.
  watch.observe(true, 59000);
  EXPECT_FALSE(watch.sweep_due(140000, start + 2s));
  EXPECT_FALSE(watch.drained(140000, false));
}

TEST(BacklogWatch, SweepsOnceTheShardsStayOutOfWork) {
  backlog_watch watch(interval, start);
  std::int64_t claimed = 0;
  busy_check(watch, claimed);
  watch.observe(true, claimed);  // out of work, nothing claimed since the last check
  EXPECT_FALSE(watch.sweep_due(3, start + 1s)) << "one check is not enough";
  watch.observe(true, claimed);
  EXPECT_TRUE(watch.sweep_due(3, start + 2s));
  watch.swept(start + 2s);
  // Rows stay outstanding (stuck ones the sweep could not touch): again only after the interval.
  watch.observe(true, claimed);
  EXPECT_FALSE(watch.sweep_due(3, start + 3s));
  watch.observe(true, claimed);
  EXPECT_TRUE(watch.sweep_due(3, start + 2s + interval));
}

TEST(BacklogWatch, NoSecondSweepOnceNothingIsOutstanding) {
  backlog_watch watch(interval, start);
  watch.observe(true, 0);
  watch.observe(true, 0);
  ASSERT_TRUE(watch.sweep_due(0, start));
  watch.swept(start);
  watch.observe(true, 0);
  EXPECT_FALSE(watch.sweep_due(0, start + 2 * interval));
}

TEST(BacklogWatch, SweepsBeforeTheDrainIsCalledDrained) {
  backlog_watch watch(interval, start);
  std::int64_t claimed = 0;
  busy_check(watch, claimed);
  EXPECT_FALSE(watch.drained(10, false));
  // The last rows were claimed and delivered between two checks: this check sees rows claimed
  // since, so the shards do not count as settled, but it is the first quiet one.
  claimed += 10;
  watch.observe(true, claimed);
  EXPECT_FALSE(watch.sweep_due(0, start + 1s));
  EXPECT_FALSE(watch.drained(0, false));
  // The next quiet check would end the drain: it sweeps first.
  watch.observe(true, claimed);
  EXPECT_TRUE(watch.sweep_due(0, start + 2s));
  watch.swept(start + 2s);
  EXPECT_TRUE(watch.drained(0, false));
}

TEST(BacklogWatch, DrainedNeedsTwoQuietChecksInARow) {
  backlog_watch watch(interval, start);
  watch.observe(true, 0);
  EXPECT_FALSE(watch.drained(0, false));
  // Outcomes or claims waiting at the next check: it does not count, and quiet starts over.
  watch.interrupted();
  watch.observe(true, 0);
  EXPECT_FALSE(watch.drained(0, false));
  watch.observe(true, 0);
  EXPECT_TRUE(watch.drained(0, false));
}

TEST(BacklogWatch, NotDrainedWhileWorkIsInFlightOrDueSoon) {
  backlog_watch watch(interval, start);
  for (int i = 0; i < 3; ++i) {
    watch.observe(false, 0);  // the last requests still in flight
    EXPECT_FALSE(watch.drained(0, false));
  }
  for (int i = 0; i < 3; ++i) {
    watch.observe(true, 0);
    EXPECT_FALSE(watch.drained(0, true)) << "a retry falls due within the wait";
  }
  watch.observe(true, 0);
  EXPECT_FALSE(watch.drained(0, false));
  watch.observe(true, 0);
  EXPECT_TRUE(watch.drained(0, false));
}

TEST(BacklogWatch, TheEndMayBeNearAfterBusyShardsOrAQuietCheckNotAfterAnIdleCheckWithWorkLeft) {
  backlog_watch watch(interval, start);
  watch.observe(false, 0);  // the shards at work: they may run out before the next check
  EXPECT_FALSE(watch.drained(0, false));
  EXPECT_TRUE(watch.end_may_be_near());
  watch.observe(true, 0);
  EXPECT_FALSE(watch.drained(0, true));  // idle, but a retry falls due within the wait
  EXPECT_FALSE(watch.end_may_be_near());
  watch.observe(true, 0);
  EXPECT_FALSE(watch.drained(0, false));  // the first quiet check: the second may come soon
  EXPECT_TRUE(watch.end_may_be_near());
  watch.interrupted();  // outcomes another session holds made the next check skip
  EXPECT_FALSE(watch.end_may_be_near());
  watch.observe(true, 0);
  EXPECT_FALSE(watch.drained(3, false));  // idle, with rows left
  EXPECT_FALSE(watch.end_may_be_near());
  watch.observe(false, 0);
  EXPECT_TRUE(watch.end_may_be_near());
  watch.check_failed();
  EXPECT_FALSE(watch.end_may_be_near());
}

TEST(BacklogWatch, PeriodicSweepWaitsOneIntervalFromTheStart) {
  backlog_watch watch(interval, start);
  EXPECT_FALSE(watch.periodic_sweep_due(start + interval - 1s));
  EXPECT_TRUE(watch.periodic_sweep_due(start + interval));
  watch.swept(start + interval);
  EXPECT_FALSE(watch.periodic_sweep_due(start + interval + 1s));
}

const backlog_check_timing timing{.small_backlog = 250ms, .large_backlog = 2s};

TEST(BacklogCheckInterval, ALargeBacklogIsCountedRarelyWhileTheShardsHaveWork) {
  EXPECT_EQ(backlog_check_interval(timing, 200000, false, 18ms), clock::duration(2s));
  // Before the first count the backlog is unknown, and taken as large.
  EXPECT_EQ(backlog_check_interval(timing, -1, false, 0ms), clock::duration(2s));
}

TEST(BacklogCheckInterval, ASmallBacklogOrIdleShardsAreCheckedOften) {
  EXPECT_EQ(backlog_check_interval(timing, 1000, false, 100us), clock::duration(250ms));
  EXPECT_EQ(backlog_check_interval(timing, 0, true, 10us), clock::duration(250ms));
  // Idle shards with rows still due: the end may be near, and the count is cheap.
  EXPECT_EQ(backlog_check_interval(timing, 20000, true, 2ms), clock::duration(250ms));
}

TEST(BacklogCheckInterval, WithTheEndInSightAnUntilDrainedDrainChecksSoon) {
  backlog_check_timing until_drained = timing;
  until_drained.end_in_sight = 25ms;
  EXPECT_EQ(backlog_check_interval(until_drained, 0, true, 100us, true), clock::duration(25ms));
  // Not while a shard still has work, nor while rows are known to be left, nor once an idle
  // check found something that keeps the drain going (backlog_watch::end_may_be_near).
  EXPECT_EQ(backlog_check_interval(until_drained, 0, false, 100us, true), clock::duration(250ms));
  EXPECT_EQ(backlog_check_interval(until_drained, 40, true, 100us, true), clock::duration(250ms));
  EXPECT_EQ(backlog_check_interval(until_drained, 0, true, 100us, false), clock::duration(250ms));
  // A drain that does not end on an empty queue keeps the drained-check interval.
  EXPECT_EQ(backlog_check_interval(timing, 0, true, 100us, true), clock::duration(250ms));
  // The count's own cost still spaces the checks.
  EXPECT_EQ(backlog_check_interval(until_drained, 0, true, 2ms, true), clock::duration(100ms));
}

TEST(BacklogCheckInterval, ASlowCountSpacesTheNextOneOut) {
  // About what counting a million due rows takes: with idle-looking shards bringing each count
  // 250 ms after the last, the storage thread would be counting about a third of the time.
  EXPECT_EQ(backlog_check_interval(timing, 1000000, true, 105ms), clock::duration(5250ms));
  EXPECT_EQ(backlog_check_interval(timing, 1000000, false, 105ms), clock::duration(5250ms));
  backlog_check_timing looser = timing;
  looser.count_cost_multiple = 20;
  EXPECT_EQ(backlog_check_interval(looser, 1000000, false, 105ms), clock::duration(2100ms));
}

TEST(BacklogCheckInterval, OneStalledCountDoesNotHoldTheEndForMinutes) {
  // A count that took 10 s (a stalled disk, a busy PostgreSQL server) would mean 200 s.
  EXPECT_EQ(backlog_check_interval(timing, 50, true, 10s), clock::duration(30s));
}

TEST(BacklogEstimate, BetweenCountsTheLastCountLessTheRowsFinishedSince) {
  backlog_estimate estimate;
  EXPECT_EQ(estimate.at(0), -1) << "unknown before the first count";
  estimate.counted(200000, 1500);  // 1,500 rows had been finished when the count ran
  EXPECT_EQ(estimate.at(1500), 200000);
  EXPECT_EQ(estimate.at(51500), 150000);
  EXPECT_EQ(estimate.at(500000), 0) << "never below zero: rows queued since count nowhere";
  // The next count replaces it, rows queued meanwhile included.
  estimate.counted(180000, 60000);
  EXPECT_EQ(estimate.at(70000), 170000);
}

TEST(BacklogEstimate, AsTheDrainNearsItsEndTheChecksComeOften) {
  // A large count is refreshed rarely; the rows finished since bring the estimate down, and once
  // it is small the checks that can end --until-drained come at the short interval again.
  backlog_estimate estimate;
  estimate.counted(200000, 0);
  EXPECT_EQ(backlog_check_interval(timing, estimate.at(100000), false, 2ms), clock::duration(2s));
  EXPECT_EQ(backlog_check_interval(timing, estimate.at(199500), false, 2ms),
            clock::duration(250ms));
}

TEST(FirstCountDue, WaitsForTheFirstClaimsAnswer) {
  // The shards ask a moment after start; a count before their answer would hold their claims.
  EXPECT_FALSE(first_count_due(false, 0ms, 100ms));
  EXPECT_FALSE(first_count_due(false, 99ms, 100ms));
  EXPECT_TRUE(first_count_due(true, 1ms, 100ms));
}

TEST(FirstCountDue, CountsAnywayWhenNoShardAsks) {
  // Every subscriber paused or inactive: no claim comes, and the counts alone end the drain.
  EXPECT_TRUE(first_count_due(false, 100ms, 100ms));
  EXPECT_TRUE(first_count_due(false, 5s, 100ms));
}

}  // namespace
}  // namespace surge::engine
