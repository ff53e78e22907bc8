// When the storage thread's periodic work falls due (engine/storage_thread/cadence.hpp), on a
// simulated clock: reloads, ownership renewals (sooner during a handoff), new-row checks and
// backlog counts.
#include "engine/storage_thread/cadence.hpp"

#include <chrono>

#include <gtest/gtest.h>

namespace surge::engine {
namespace {

using namespace std::chrono_literals;
using clock = storage_cadence::clock;

const clock::time_point start{1000s};

// The engine's defaults: reload 3 s, renew 1 s (100 ms in a handoff), new rows every 2 ms,
// backlog every 250 ms when small and 2 s when large, first count 100 ms after start.
storage_cadence started_at(clock::time_point at) {
  storage_cadence cadence(storage_worker_config{}, false);
  cadence.reloaded(at);
  cadence.renewed(at);
  cadence.started(at);
  return cadence;
}

TEST(StorageCadence, BeforeAnythingRanTheReloadAndRenewalAreDue) {
  const storage_cadence cadence(storage_worker_config{}, false);
  const auto due = cadence.due(start, -1, true);
  EXPECT_TRUE(due.reload_subscribers);
  EXPECT_TRUE(due.renew_ownership);
}

TEST(StorageCadence, SubscribersAreReloadedEveryInterval) {
  auto cadence = started_at(start);
  EXPECT_FALSE(cadence.due(start + 2999ms, 0, false).reload_subscribers);
  EXPECT_TRUE(cadence.due(start + 3s, 0, false).reload_subscribers);
  cadence.reloaded(start + 3s);
  EXPECT_FALSE(cadence.due(start + 5s, 0, false).reload_subscribers);
  EXPECT_TRUE(cadence.due(start + 6s, 0, false).reload_subscribers);
}

TEST(StorageCadence, AHandoffUnderWayIsPolledSoonerThanTheRenewal) {
  auto cadence = started_at(start);
  EXPECT_FALSE(cadence.due(start + 100ms, 0, false).renew_ownership);
  cadence.handoff_awaited(true);
  EXPECT_TRUE(cadence.due(start + 100ms, 0, false).renew_ownership);
  cadence.renewed(start + 100ms);
  EXPECT_FALSE(cadence.due(start + 199ms, 0, false).renew_ownership);
  // The handoff is done: back to the full interval.
  cadence.handoff_awaited(false);
  EXPECT_FALSE(cadence.due(start + 200ms, 0, false).renew_ownership);
  EXPECT_TRUE(cadence.due(start + 1100ms, 0, false).renew_ownership);
}

TEST(StorageCadence, AFailedRenewalKeepsWhatTheLastOneFound) {
  auto cadence = started_at(start);
  cadence.handoff_awaited(true);
  cadence.renewed(start + 100ms);  // failed: nothing new was learnt
  EXPECT_TRUE(cadence.due(start + 200ms, 0, false).renew_ownership);
}

TEST(StorageCadence, TheFirstCountWaitsForAnAnsweredClaimOrItsWait) {
  auto cadence = started_at(start);
  EXPECT_FALSE(cadence.due(start + 50ms, -1, true).count_backlog);
  EXPECT_TRUE(cadence.due(start + 100ms, -1, true).count_backlog);
  auto answered = started_at(start);
  answered.claim_answered();
  EXPECT_TRUE(answered.due(start + 1ms, -1, true).count_backlog);
}

TEST(StorageCadence, ALargeBacklogWithBusyShardsIsCountedRarely) {
  auto cadence = started_at(start);
  cadence.claim_answered();
  cadence.backlog_checked(start);
  cadence.backlog_counted(1ms);
  EXPECT_FALSE(cadence.due(start + 9s, 200'000, false).count_backlog);
  EXPECT_TRUE(cadence.due(start + 10s, 200'000, false).count_backlog);
  // Idle shards or a small backlog: the end may be near, so counts come every 250 ms.
  EXPECT_TRUE(cadence.due(start + 250ms, 200'000, true).count_backlog);
  EXPECT_TRUE(cadence.due(start + 250ms, 10, false).count_backlog);
  EXPECT_FALSE(cadence.due(start + 249ms, 10, false).count_backlog);
}

TEST(StorageCadence, ASlowCountSpacesTheNextOne) {
  auto cadence = started_at(start);
  cadence.claim_answered();
  cadence.backlog_checked(start);
  cadence.backlog_counted(100ms);  // 50 times that: 5 s
  EXPECT_FALSE(cadence.due(start + 4999ms, 10, true).count_backlog);
  EXPECT_TRUE(cadence.due(start + 5s, 10, true).count_backlog);
  // However slow, a count is never more than 30 s away.
  cadence.backlog_counted(10s);
  EXPECT_TRUE(cadence.due(start + 30s, 10, true).count_backlog);
}

TEST(StorageCadence, NewRowsAreLookedForEveryIntervalUnlessTurnedOff) {
  auto cadence = started_at(start);
  EXPECT_TRUE(cadence.new_rows_check_due(start));
  cadence.new_rows_checked(start);
  EXPECT_FALSE(cadence.new_rows_check_due(start + 1ms));
  EXPECT_TRUE(cadence.new_rows_check_due(start + 2ms));
  storage_worker_config off;
  off.new_rows_check_interval = 0ms;
  const storage_cadence never(off, false);
  EXPECT_FALSE(never.new_rows_check_due(start + 1h));
}

}  // namespace
}  // namespace surge::engine
