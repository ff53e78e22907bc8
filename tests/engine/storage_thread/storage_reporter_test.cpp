// What the storage thread counts and says (engine/storage_thread/storage_reporter.hpp): a lasting
// condition is said the first time and then at most every so often, a repaired bucket once per
// subscriber, and each fact moves its counter.
#include "engine/storage_thread/storage_reporter.hpp"

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/engine/recorded_log.hpp"

namespace surge::engine {
namespace {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

struct StorageReporter : ::testing::Test {
  drain_counters counters;
  testing::recorded_log log;
  storage_reporter report{counters, log, 30s};
  clock::time_point t0{};

  std::size_t lines_saying(const std::string& part) const {
    std::size_t n = 0;
    for (const auto& line : log.lines) n += line.text.find(part) != std::string::npos ? 1 : 0;
    return n;
  }
};

TEST_F(StorageReporter, HeldRowsAreSaidTheFirstTimeThenAtMostEveryInterval) {
  storage::write_report held;
  held.held_rows = {8};
  report.rows_held(t0, held);
  report.rows_held(t0 + 1s, held);
  report.rows_held(t0 + 29s, held);
  EXPECT_EQ(lines_saying("are locked"), 1U);
  report.rows_held(t0 + 30s, held);
  EXPECT_EQ(lines_saying("are locked"), 2U);
}

TEST_F(StorageReporter, HeldSubscribersHaveTheirOwnIntervalAndAnEmptyListSaysNothing) {
  // An empty list is no episode: the first held subscriber after it is said at once.
  report.subscribers_held(t0, {});
  EXPECT_TRUE(log.lines.empty());
  storage::write_report held;
  held.held_rows = {8};
  report.rows_held(t0, held);
  // Rows held just now do not silence the subscribers' warning.
  report.subscribers_held(t0 + 1s, {5});
  report.subscribers_held(t0 + 2s, {});
  report.subscribers_held(t0 + 3s, {5});
  EXPECT_EQ(lines_saying("subscriber 5: the subscriber row is locked"), 1U);
  report.subscribers_held(t0 + 31s, {5});
  EXPECT_EQ(lines_saying("subscriber 5: the subscriber row is locked"), 2U);
}

TEST_F(StorageReporter, ARepairedBucketIsSaidOncePerSubscriber) {
  std::vector<storage::token_grant> grants{
      {.subscriber_id = 4, .tokens = 1, .next_token_at = 0, .repaired = "stamped ahead"},
      {.subscriber_id = 6, .tokens = 1, .next_token_at = 0, .repaired = ""}};
  report.granted(grants);
  report.granted(grants);
  EXPECT_EQ(lines_saying("repaired (stamped ahead)"), 1U);
  EXPECT_EQ(log.lines.size(), 1U);  // subscriber 6's bucket was sound
  grants[1].repaired = "tokens above burst";
  report.granted(grants);
  EXPECT_EQ(log.lines.size(), 2U);
}

TEST_F(StorageReporter, EachFactMovesItsCounter) {
  storage::write_report written;
  written.lost_leases = {4, 7};
  written.deleted = {4};
  written.keys_stopped = {{.subscriber_id = 2, .key = "\"a\"", .delivery_id = 6}};
  report.written(written);
  EXPECT_EQ(counters.lost_leases.load(), 2);
  EXPECT_EQ(counters.keys_stopped.load(), 1);
  EXPECT_TRUE(log.says("were deleted"));
  EXPECT_TRUE(log.says("lost the lease of 1 rows (first id 7)"));

  const auto said = log.lines.size();
  report.dead_lettered(6, "why");
  ASSERT_EQ(log.lines.size(), said + 1);
  EXPECT_EQ(log.lines.back().level, log_level::error);
  report.swept(3, {.next_attempt_at = 1, .locked_until = 0, .far_lease = 0});
  EXPECT_EQ(counters.dead.load(), 1 + 3 + 1);
  // A quarantined row is not dead: its outcome was never written.
  report.quarantined(9, "why");
  EXPECT_EQ(counters.dead.load(), 5);
  EXPECT_EQ(log.lines.back().level, log_level::error);
  EXPECT_TRUE(log.says("row 9: why; even a dead-letter was refused"));
  report.refused_outcome();
  EXPECT_EQ(counters.refused_outcomes.load(), 1);
  report.failure(log_level::warn, "renewing failed: ", storage::error("boom"));
  EXPECT_EQ(counters.storage_errors.load(), 1);
  EXPECT_EQ(log.lines.back().level, log_level::warn);
  EXPECT_TRUE(log.says("renewing failed: boom"));
}

TEST_F(StorageReporter, OwnershipLostIsSaidOnlyWhenSomethingWasLost) {
  report.ownership_lost({});
  EXPECT_TRUE(log.lines.empty());
  report.ownership_lost({3, 1});
  EXPECT_TRUE(log.says("lost ownership of 2 subscribers (first 3)"));
}

}  // namespace
}  // namespace surge::engine
