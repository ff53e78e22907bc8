// A round's periodic reads (engine/storage_thread/periodic_reads.hpp), on a simulated clock: their
// order, the ping at most once per interval, a stopped drain that only pings, the outcomes
// written before a count, a count skipped while work waits, and the sweep that comes with a
// reload (never with the first).
#include "engine/storage_thread/periodic_reads.hpp"

#include <chrono>
#include <optional>
#include <vector>

#include <gtest/gtest.h>

namespace surge::engine {
namespace {

using namespace std::chrono_literals;
using read = periodic_reads::read;
using clock = std::chrono::steady_clock;

const clock::time_point t0 = clock::time_point{} + 1h;

storage_core_config config() {
  storage_core_config config;
  config.ping_interval = 1s;
  config.storage.subscriber_reload_interval = 3s;
  config.storage.ownership_renew = 1s;
  config.stuck_row_sweep_interval = 30s;
  return config;
}

// The reads of one round at `now`, none of them busy.
std::vector<read> round_at(periodic_reads& reads, clock::time_point now, bool claiming = true,
                           bool busy = false) {
  reads.start_round(now, claiming, 0, false);
  std::vector<read> seen;
  for (auto next = reads.next(now, 0, busy); next != read::done; next = reads.next(now, 0, busy)) {
    seen.push_back(next);
  }
  return seen;
}

TEST(PeriodicReads, ARoundReadsInOrderWhatIsDue) {
  periodic_reads reads(config());
  reads.begin(t0);
  reads.claim_answered(0);  // the first count may come
  // At the start the ping is due (never pinged) and the first count; the reload and renewal
  // were begin()'s.
  EXPECT_EQ(
      round_at(reads, t0 + 1ms),
      (std::vector<read>{read::check_database, read::write_outcomes_first, read::count_backlog}));
  // A small backlog is counted again at the drained-check interval (250 ms).
  EXPECT_EQ(reads.counted(t0 + 1ms, 5, std::nullopt, 1ms, false, 0), backlog_check::then::nothing);
  EXPECT_TRUE(round_at(reads, t0 + 200ms).empty());
  EXPECT_EQ(round_at(reads, t0 + 300ms),
            (std::vector<read>{read::write_outcomes_first, read::count_backlog}));
  // Three seconds on: everything, in the round's order.
  EXPECT_EQ(
      round_at(reads, t0 + 3s),
      (std::vector<read>{read::check_database, read::reload_subscribers, read::renew_ownership,
                         read::write_outcomes_first, read::count_backlog}));
}

TEST(PeriodicReads, TheDatabaseIsPingedAtMostOncePerInterval) {
  periodic_reads reads(config());
  reads.begin(t0);
  EXPECT_EQ(round_at(reads, t0 + 10ms), std::vector<read>{read::check_database});
  for (const auto seen : round_at(reads, t0 + 500ms)) EXPECT_NE(seen, read::check_database);
  const auto later = round_at(reads, t0 + 1010ms);
  ASSERT_FALSE(later.empty());
  EXPECT_EQ(later.front(), read::check_database);
}

TEST(PeriodicReads, AStoppedDrainOnlyPings) {
  periodic_reads reads(config());
  reads.begin(t0);
  reads.claim_answered(0);
  EXPECT_EQ(round_at(reads, t0 + 10s, false), std::vector<read>{read::check_database});
}

TEST(PeriodicReads, ACountWhileOutcomesOrClaimsWaitIsSkippedUntilTheNextCheck) {
  periodic_reads reads(config());
  reads.begin(t0);
  reads.claim_answered(0);
  EXPECT_EQ(round_at(reads, t0 + 1ms, true, true),
            (std::vector<read>{read::check_database, read::write_outcomes_first}));
  // The skipped check spaces the next one as a count would have (the backlog unknown, so large:
  // the backlog-refresh interval).
  EXPECT_TRUE(round_at(reads, t0 + 2ms).empty());
  EXPECT_EQ(
      round_at(reads, t0 + 10s + 1ms),
      (std::vector<read>{read::check_database, read::reload_subscribers, read::renew_ownership,
                         read::write_outcomes_first, read::count_backlog}));
}

TEST(PeriodicReads, ASkippedCountEndsTheQuickChecksOfAnEndInSight) {
  auto settings = config();
  settings.until_drained = true;
  periodic_reads reads(settings);
  reads.begin(t0);
  reads.claim_answered(0);
  ASSERT_EQ(round_at(reads, t0 + 1ms).back(), read::count_backlog);
  // The shards were at work and nothing is left: the end may be near.
  EXPECT_EQ(reads.counted(t0 + 1ms, 0, std::nullopt, 100us, false, 0),
            backlog_check::then::nothing);
  // Idle and estimated empty, the next check comes 25 ms on, but work waits and it is skipped...
  reads.start_round(t0 + 30ms, true, 0, true);
  EXPECT_EQ(reads.next(t0 + 30ms, 0, true), read::write_outcomes_first);
  EXPECT_EQ(reads.next(t0 + 30ms, 0, true), read::done);
  // ...so the end is no longer taken to be near: the next waits the drained-check interval.
  reads.start_round(t0 + 60ms, true, 0, true);
  EXPECT_EQ(reads.next(t0 + 60ms, 0, false), read::done);
  reads.start_round(t0 + 280ms, true, 0, true);
  EXPECT_EQ(reads.next(t0 + 280ms, 0, false), read::write_outcomes_first);
}

TEST(PeriodicReads, AReloadBringsTheStuckRowSweepAtItsIntervalButBeginsOnesNever) {
  periodic_reads reads(config());
  reads.begin(t0);
  EXPECT_FALSE(reads.reloaded(t0 + 31s));  // begin()'s reload, however late its answer
  EXPECT_TRUE(reads.reloaded(t0 + 34s));
  EXPECT_FALSE(reads.reloaded(t0 + 37s));  // the sweep just ran
  EXPECT_TRUE(reads.reloaded(t0 + 64s));
}

TEST(PeriodicReads, AFailedFirstReloadLeavesTheNextOneItsSweep) {
  periodic_reads reads(config());
  reads.begin(t0);
  reads.reload_failed();
  EXPECT_TRUE(reads.reloaded(t0 + 31s));
}

TEST(PeriodicReads, NewRowsAreAskedAboutAtTheirInterval) {
  auto settings = config();
  settings.storage.new_rows_check_interval = 2ms;
  periodic_reads reads(settings);
  reads.begin(t0);
  EXPECT_TRUE(reads.new_rows_check(t0 + 2ms));
  EXPECT_FALSE(reads.new_rows_check(t0 + 3ms));
  EXPECT_TRUE(reads.new_rows_check(t0 + 4ms));
}

}  // namespace
}  // namespace surge::engine
