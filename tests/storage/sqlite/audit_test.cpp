#include "storage/sqlite/audit.hpp"

#include <string>
#include <vector>

#include <SQLiteCpp/Statement.h>
#include <gtest/gtest.h>

#include "tests/storage/test_db.hpp"

namespace surge::storage::sqlite {
namespace {

// `count` attempts, one every `spacing` seconds from `start`, each taking `latency`.
std::vector<attempt_sample> evenly(int count, double start, double spacing, double latency = 0.01,
                                   int status = 200) {
  std::vector<attempt_sample> out;
  for (int i = 0; i < count; ++i) {
    const double at = start + i * spacing;
    out.push_back({at, at + latency, status});
  }
  return out;
}

TEST(AuditMath, MaxInWindowIsHalfOpen) {
  const std::vector<double> starts = {0, 0.5, 0.99, 1.0, 1.5, 3};
  EXPECT_EQ(max_in_window(starts, 1), 3);  // [0, 1) holds 0, 0.5, 0.99; 1.0 starts the next
  EXPECT_EQ(max_in_window(starts, 1.01), 4);
  EXPECT_EQ(max_in_window(starts, 60), 6);
  EXPECT_EQ(max_in_window({}, 1), 0);
  const std::vector<double> same = {5, 5, 5, 5};
  EXPECT_EQ(max_in_window(same, 1), 4);
}

TEST(AuditMath, NearestRankPercentiles) {
  std::vector<double> values;
  for (int i = 1; i <= 100; ++i) values.push_back(i);
  EXPECT_EQ(nearest_rank(values, 50), 50);
  EXPECT_EQ(nearest_rank(values, 90), 90);
  EXPECT_EQ(nearest_rank(values, 99), 99);
  EXPECT_EQ(nearest_rank(values, 100), 100);
  EXPECT_EQ(nearest_rank(values, 0), 1);
  const std::vector<double> few = {0.1, 0.2, 0.3};
  EXPECT_EQ(nearest_rank(few, 50), 0.2);
  EXPECT_EQ(nearest_rank(few, 90), 0.3);
  EXPECT_EQ(nearest_rank({}, 50), 0);
}

TEST(AuditMath, AllowanceIsBurstPlusRateTimesWindowPlusOne) {
  EXPECT_EQ(allowed_in_window({.rate_per_sec = 5, .burst = 10}, 1), 16);
  EXPECT_EQ(allowed_in_window({.rate_per_sec = 5, .burst = 10}, 60), 311);
  EXPECT_EQ(allowed_in_window({.rate_per_sec = 0, .burst = 3}, 60), 4);
}

TEST(AuditMath, ConformingSubscriberHasNoViolation) {
  // burst 10 at once, then exactly 5/s for 60 s.
  auto attempts = evenly(10, 1000, 0);
  const auto steady = evenly(300, 1000.2, 0.2);
  attempts.insert(attempts.end(), steady.begin(), steady.end());
  const auto audit = audit_attempts(7, attempts, audit_limit{.rate_per_sec = 5, .burst = 10});
  EXPECT_EQ(audit.subscriber_id, 7);
  EXPECT_EQ(audit.attempts, 310);
  EXPECT_EQ(audit.successes, 310);
  EXPECT_EQ(audit.max_per_1s, 14);  // the burst and 1000.2 .. 1000.8 in [1000, 1001)
  EXPECT_LE(audit.max_per_1s, audit.allowed_per_1s);
  EXPECT_LE(audit.max_per_60s, audit.allowed_per_60s);
  EXPECT_FALSE(audit.violation);
  ASSERT_TRUE(audit.achieved_rate.has_value());
  EXPECT_NEAR(*audit.achieved_rate, 5, 1e-9);  // (310 - 10) / (1060 - 1000)
  EXPECT_DOUBLE_EQ(audit.first_started_at, 1000);
  EXPECT_NEAR(audit.last_started_at, 1060, 1e-9);
}

TEST(AuditMath, TooManyInOneSecondIsAViolation) {
  // 40 requests within half a second against burst 10 + 5/s.
  const auto audit =
      audit_attempts(1, evenly(40, 0, 0.0125), audit_limit{.rate_per_sec = 5, .burst = 10});
  EXPECT_EQ(audit.max_per_1s, 40);
  EXPECT_TRUE(audit.violation);
}

TEST(AuditMath, SustainedOverRateShowsInTheMinuteWindow) {
  // 6/s against 5/s: every second is within burst + rate + 1, the minute is not.
  const auto audit =
      audit_attempts(1, evenly(360, 0, 1.0 / 6), audit_limit{.rate_per_sec = 5, .burst = 10});
  EXPECT_LE(audit.max_per_1s, audit.allowed_per_1s);
  EXPECT_EQ(audit.max_per_60s, 360);
  EXPECT_DOUBLE_EQ(audit.allowed_per_60s, 311);
  EXPECT_TRUE(audit.violation);
}

TEST(AuditMath, WorstWindowOfAnyLength) {
  const audit_limit limit{.rate_per_sec = 2, .burst = 3};
  // A bucket of 3 refilled at 2/s, drained exactly: 3 at once, then one every 0.5 s.
  std::vector<double> exact = {10, 10, 10};
  for (int i = 1; i <= 20; ++i) exact.push_back(10 + i * 0.5);
  auto worst = worst_window(exact, limit);
  EXPECT_NEAR(worst.excess, -1, 1e-9);  // the + 1 of clock granularity is all that is left
  // One extra request uses up the granularity allowance; two exceed it, in the window from
  // the first burst to them.
  exact.push_back(exact.back());
  EXPECT_NEAR(worst_window(exact, limit).excess, 0, 1e-9);
  exact.push_back(exact.back());
  worst = worst_window(exact, limit);
  EXPECT_NEAR(worst.excess, 1, 1e-9);
  EXPECT_EQ(worst.count, 25);
  EXPECT_NEAR(worst.seconds, 10, 1e-9);

  EXPECT_EQ(worst_window({}, limit).count, 0);
  const std::vector<double> one = {5};
  EXPECT_EQ(worst_window(one, limit).excess, -3);
}

TEST(AuditMath, SustainedExcessBetweenOneAndSixtySecondsIsAViolation) {
  // 1.4 x the rate for 20 s: no 1 s window and no 60 s window is over its allowance, a 20 s
  // window is (10 + 5 * 20 + 1 = 111 allowed, 140 sent).
  const auto audit =
      audit_attempts(1, evenly(140, 0, 1.0 / 7), audit_limit{.rate_per_sec = 5, .burst = 10});
  EXPECT_LE(audit.max_per_1s, audit.allowed_per_1s);
  EXPECT_LE(audit.max_per_60s, audit.allowed_per_60s);
  EXPECT_EQ(audit.worst_window_count, 140);
  EXPECT_NEAR(audit.worst_window_excess, 140 - (10 + 5 * 139.0 / 7 + 1), 1e-6);
  EXPECT_TRUE(audit.violation);
}

TEST(AuditMath, LatencyPercentilesSuccessesAndMissingLimit) {
  std::vector<attempt_sample> attempts;
  for (int i = 1; i <= 100; ++i) {
    // Latency i ms, in shuffled start order; every tenth one failed.
    const double start = (i * 37) % 100;
    attempts.push_back({start, start + i / 1000.0, i % 10 == 0 ? 503 : 204});
  }
  const auto audit = audit_attempts(3, attempts, std::nullopt);
  EXPECT_EQ(audit.successes, 90);
  EXPECT_NEAR(audit.latency_p50, 0.050, 1e-9);
  EXPECT_NEAR(audit.latency_p90, 0.090, 1e-9);
  EXPECT_NEAR(audit.latency_p99, 0.099, 1e-9);
  EXPECT_FALSE(audit.limit.has_value());
  EXPECT_FALSE(audit.violation);  // nothing to hold it against
  EXPECT_FALSE(audit.achieved_rate.has_value());
}

TEST(AuditMath, NoAchievedRateWithinTheBurst) {
  const auto audit =
      audit_attempts(1, evenly(10, 0, 0.1), audit_limit{.rate_per_sec = 1, .burst = 10});
  EXPECT_FALSE(audit.achieved_rate.has_value());
  EXPECT_FALSE(audit_attempts(1, {}, std::nullopt).violation);
}

TEST(AuditMath, AnswersPerSecondCountFailuresBesideSuccesses) {
  const std::vector<attempt_sample> attempts = {
      {10.2, 10.3, 200}, {10.9, 11.0, 200}, {11.1, 11.2, 500}, {13.0, 13.1, 299}, {12.5, 12.6, 0}};
  const auto bins = answers_per_second(attempts);
  ASSERT_EQ(bins.size(), 4u);
  EXPECT_EQ(bins[0].second, 10);
  EXPECT_EQ(bins[0].delivered, 2);
  EXPECT_EQ(bins[0].failed, 0);
  EXPECT_EQ(bins[1].second, 11);
  EXPECT_EQ(bins[1].delivered, 0);
  EXPECT_EQ(bins[1].failed, 1);
  EXPECT_EQ(bins[2].second, 12);
  EXPECT_EQ(bins[2].failed, 1);  // no answer at all
  EXPECT_EQ(bins[3].second, 13);
  EXPECT_EQ(bins[3].delivered, 1);
}

TEST(AuditRead, ReadsPerSubscriberWithCurrentLimits) {
  testing::temp_dir dir;
  SQLite::Database db = testing::open_migrated(dir.file("queue.db"));
  const auto a = testing::insert_subscriber_old(db, "*", 2.0, 3);
  const auto b = testing::insert_subscriber_old(db, "*", 5.0, 10);
  SQLite::Statement insert(db,
                           "INSERT INTO surge_attempt(delivery_id, subscriber_id, attempt, "
                           "started_at, finished_at, status_code, error_class) "
                           "VALUES (1, ?, 1, ?, ?, ?, ?)");
  auto add = [&](std::int64_t sub, double start, double latency, int status) {
    insert.reset();
    insert.bind(1, sub);
    insert.bind(2, start);
    insert.bind(3, start + latency);
    if (status) {
      insert.bind(4, status);
      insert.bind(5);
    } else {
      insert.bind(4);
      insert.bind(5, "timeout");
    }
    insert.exec();
  };
  for (int i = 0; i < 8; ++i) add(a, 100 + i * 0.01, 0.02, 200);  // 8 at once: over 3 + 2 + 1
  add(b, 100, 0.5, 0);
  add(b, 101, 0.1, 200);
  add(99, 100, 0.1, 200);  // a subscriber since deleted

  const auto all = read_audit(db, {}, true);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].summary.subscriber_id, a);
  EXPECT_TRUE(all[0].summary.violation);
  EXPECT_EQ(all[0].summary.max_per_1s, 8);
  EXPECT_DOUBLE_EQ(all[0].summary.allowed_per_1s, 6);
  ASSERT_EQ(all[0].answers.size(), 1u);
  EXPECT_EQ(all[0].answers[0].delivered, 8);
  EXPECT_EQ(all[1].summary.subscriber_id, b);
  EXPECT_FALSE(all[1].summary.violation);
  EXPECT_EQ(all[1].summary.successes, 1);  // a timeout has no status
  EXPECT_NEAR(all[1].summary.latency_p99, 0.5, 1e-9);
  EXPECT_EQ(all[2].summary.subscriber_id, 99);
  EXPECT_FALSE(all[2].summary.limit.has_value());

  const auto only_b = read_audit(db, *proto::id_set::parse(std::to_string(b)));
  ASSERT_EQ(only_b.size(), 1u);
  EXPECT_TRUE(only_b[0].answers.empty()) << "no series unless asked for";
}

TEST(AuditRead, UnmigratedFileHasNothingToAudit) {
  testing::temp_dir dir;
  SQLite::Database db(dir.file("queue.db"), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
  testing::create_shared_tables(db);
  EXPECT_TRUE(read_audit(db).empty());
}

}  // namespace
}  // namespace surge::storage::sqlite
