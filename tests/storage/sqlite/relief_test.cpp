// Storage for batches and coalescing (schema 3): the columns, the outcome a
// coalesced row gets, and the counts that keep POSTs (what a partner's limit is about) apart
// from rows. Real files, written through the same writer the drain uses.
#include <string>
#include <vector>

#include <SQLiteCpp/Statement.h>
#include <gtest/gtest.h>

#include "proto/clock.hpp"
#include "storage/sqlite/audit.hpp"
#include "storage/sqlite/claims.hpp"
#include "storage/sqlite/coalescing.hpp"
#include "storage/sqlite/database.hpp"
#include "storage/sqlite/outcomes.hpp"
#include "storage/sqlite/queue.hpp"
#include "storage/sqlite/schema.hpp"
#include "storage/sqlite/subscribers.hpp"
#include "tests/storage/test_db.hpp"

namespace surge::storage::sqlite {
namespace {

using testing::query_double;
using testing::query_int;
using testing::query_is_null;
using testing::query_text;

std::string of_row(const std::string& column, std::int64_t id) {
  return "SELECT " + column + " FROM webhook_delivery WHERE id = " + std::to_string(id);
}

void expect_relief_defaults(SQLite::Database& db, std::int64_t subscriber) {
  const auto row = load_subscriber(db, subscriber);
  ASSERT_TRUE(row);
  EXPECT_EQ(row->batch_max, 1);
  EXPECT_EQ(row->batch_bytes, 1'048'576);
  EXPECT_EQ(row->batch_linger, 0.5);
  EXPECT_EQ(row->coalesce_key, "");
  EXPECT_EQ(row->coalesce_window, 10);
  EXPECT_EQ(row->coalesce_events, "*");
}

TEST(ReliefSchema, SharedDdlFileMigratesToVersionThreeWithDefaults) {
  testing::temp_dir dir;
  const auto path = dir.file("queue.db");
  {
    SQLite::Database other(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    testing::create_shared_tables(other);
    testing::insert_subscriber_old(other, "video.*", 2.5, 7);
    testing::insert_deliveries_old(other, 1, 2, 50.0);
  }
  SQLite::Database db = testing::open_migrated(path);
  EXPECT_EQ(schema_version(db), latest_schema_version());
  expect_relief_defaults(db, 1);
  EXPECT_EQ(load_subscriber(db, 1)->rate_per_sec, 2.5);
  EXPECT_TRUE(query_is_null(db, of_row("coalesced_into", 1)));
  // An attempt written without the new columns (the other drainer's way) is a single request.
  db.exec(
      "INSERT INTO surge_attempt(delivery_id, subscriber_id, attempt, started_at, "
      "finished_at) VALUES (1, 1, 1, 10, 11)");
  EXPECT_TRUE(query_is_null(db, "SELECT batch_lead FROM surge_attempt"));
  EXPECT_EQ(query_int(db, "SELECT batch_size FROM surge_attempt"), 1);
}

TEST(ReliefSchema, VersionTwoFileMigratesToThreeKeepingItsRows) {
  testing::temp_dir dir;
  const auto path = dir.file("queue.db");
  {
    SQLite::Database v2 = testing::open_migrated(path);
    testing::drop_version_three(v2);
    ASSERT_EQ(schema_version(v2), 2);
    testing::insert_subscriber_old(v2, "*", 4, 8);
    testing::insert_deliveries_old(v2, 1, 3, 50.0);
    v2.exec("UPDATE webhook_delivery SET status = 'done', last_error = 'kept' WHERE id = 2");
    v2.exec(
        "INSERT INTO surge_attempt(delivery_id, subscriber_id, attempt, started_at, "
        "finished_at, status_code) VALUES (2, 1, 1, 10, 11, 200)");
  }
  SQLite::Database db = testing::open_migrated(path);
  EXPECT_EQ(schema_version(db), latest_schema_version());
  EXPECT_EQ(query_int(db, "SELECT COUNT(*) FROM surge_schema_version WHERE version = 3"), 1);
  expect_relief_defaults(db, 1);
  EXPECT_EQ(query_int(db, "SELECT COUNT(*) FROM webhook_delivery"), 3);
  EXPECT_EQ(query_text(db, of_row("last_error", 2)), "kept");
  EXPECT_TRUE(query_is_null(db, of_row("coalesced_into", 2)));
  EXPECT_EQ(query_int(db, "SELECT batch_size FROM surge_attempt WHERE delivery_id = 2"), 1);
  EXPECT_TRUE(query_is_null(db, "SELECT batch_lead FROM surge_attempt WHERE delivery_id = 2"));
}

subscriber_row relief_sample() {
  subscriber_row row;
  row.url = "https://a.example/hook";
  row.secret = "secret";
  row.batch_max = 100;
  row.batch_bytes = 65'536;
  row.batch_linger = 1.25;
  row.coalesce_key = "/data/video_id";
  row.coalesce_window = 7.5;
  row.coalesce_events = "video.rank_updated, video.views.*";
  return row;
}

void expect_same_relief(const subscriber_row& a, const subscriber_row& b) {
  EXPECT_EQ(a.batch_max, b.batch_max);
  EXPECT_EQ(a.batch_bytes, b.batch_bytes);
  EXPECT_EQ(a.batch_linger, b.batch_linger);
  EXPECT_EQ(a.coalesce_key, b.coalesce_key);
  EXPECT_EQ(a.coalesce_window, b.coalesce_window);
  EXPECT_EQ(a.coalesce_events, b.coalesce_events);
}

TEST(ReliefSubscribers, AddUpdateAndLoadRoundTripTheNewColumns) {
  testing::temp_dir dir;
  SQLite::Database db = testing::open_migrated(dir.file("queue.db"));
  auto row = relief_sample();
  row.id = add_subscriber(db, row);
  const auto loaded = load_subscriber(db, row.id);
  ASSERT_TRUE(loaded);
  expect_same_relief(*loaded, row);
  EXPECT_EQ(query_int(db, "SELECT batch_max FROM webhook_subscriber"), 100);

  row.batch_max = 1;
  row.batch_bytes = 2;
  row.batch_linger = 0;
  row.coalesce_key = "";
  row.coalesce_window = 3600;
  row.coalesce_events = "*";
  ASSERT_TRUE(update_subscriber(db, row));
  const auto all = load_subscribers(db);
  ASSERT_EQ(all.size(), 1u);
  expect_same_relief(all[0], row);
  EXPECT_EQ(query_text(db, "SELECT coalesce_key FROM webhook_subscriber"), "");
}

TEST(ReliefSubscribers, LoadOnAVersionTwoFileGivesTheDefaults) {
  testing::temp_dir dir;
  SQLite::Database db = testing::open_migrated(dir.file("queue.db"));
  testing::drop_version_three(db);
  const auto id = testing::insert_subscriber_old(db, "video.*", 3, 9);
  // `surge subscriber list` reads a file it does not migrate.
  const auto rows = load_subscribers(db);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].id, id);
  EXPECT_EQ(rows[0].rate_per_sec, 3);
  EXPECT_EQ(rows[0].burst, 9);
  EXPECT_EQ(rows[0].event_types, "video.*");
  expect_relief_defaults(db, id);
}

class ReliefOutcomes : public ::testing::Test {
 protected:
  void SetUp() override {
    sub_ = testing::insert_subscriber_old(db_, "*", 2.0, 1);
    testing::insert_deliveries_old(db_, sub_, 7, 10);
    claimer claims(db_);
    const std::vector<subscriber_demand> demand = {{sub_, 7}};
    rows_ = claims.claim(demand, 100, 30);
    ASSERT_EQ(rows_.size(), 7u);
  }

  outcome coalesced(const claimed_row& row, const claimed_row& into) {
    outcome out;
    out.delivery_id = row.id;
    out.lease = row.lease;
    out.kind = outcome_kind::coalesced;
    out.attempts = row.attempts;
    out.coalesced_into = into.id;
    out.last_error = "coalesced into delivery " + std::to_string(into.id);
    out.finished_at = 101;
    return out;
  }

  // One POST carrying `rows` (the first is its lead), answered `status`, started at `start`.
  std::vector<outcome> post(std::span<const claimed_row> rows, double start, int status = 200) {
    std::vector<outcome> outs;
    for (const auto& row : rows) {
      outcome out;
      out.delivery_id = row.id;
      out.lease = row.lease;
      out.kind = outcome_kind::done;
      out.attempts = row.attempts + 1;
      out.last_status = status;
      out.finished_at = start + 0.1;
      out.has_attempt = true;
      out.attempt = {row.id, row.subscriber_id, row.attempts + 1, start, start + 0.1, status, ""};
      if (rows.size() > 1) {
        out.attempt.batch_lead = rows.front().id;
        out.attempt.batch_size = std::ssize(rows);
      }
      outs.push_back(std::move(out));
    }
    return outs;
  }

  testing::temp_dir dir_;
  SQLite::Database db_ = testing::open_migrated(dir_.file("queue.db"));
  std::int64_t sub_ = 0;
  std::vector<claimed_row> rows_;
};

TEST_F(ReliefOutcomes, ACoalescedRowIsDoneUnsentNamingItsReplacement) {
  outcome_writer writer(db_);
  const std::vector<outcome> batch = {coalesced(rows_[0], rows_[2])};
  const auto report = writer.write(batch);
  EXPECT_EQ(report.applied, 1);
  EXPECT_TRUE(report.lost_leases.empty());
  const auto id = rows_[0].id;
  EXPECT_EQ(query_text(db_, of_row("status", id)), "done");
  EXPECT_TRUE(query_is_null(db_, of_row("delivered_at", id))) << "it was never sent";
  EXPECT_EQ(query_int(db_, of_row("coalesced_into", id)), rows_[2].id);
  EXPECT_EQ(query_text(db_, of_row("last_error", id)),
            "coalesced into delivery " + std::to_string(rows_[2].id));
  EXPECT_EQ(query_double(db_, of_row("locked_until", id)), 0);
  EXPECT_EQ(query_int(db_, of_row("attempts", id)), 0);
  EXPECT_EQ(query_int(db_, "SELECT COUNT(*) FROM surge_attempt"), 0);
  // The others are untouched.
  EXPECT_TRUE(query_is_null(db_, of_row("coalesced_into", rows_[1].id)));
  EXPECT_EQ(query_text(db_, of_row("status", rows_[1].id)), "pending");
}

TEST_F(ReliefOutcomes, ACoalescedWriteIsFencedOnTheLease) {
  outcome_writer writer(db_);
  auto stale = coalesced(rows_[0], rows_[2]);
  stale.lease += 1;  // another drainer re-leased the row since
  const std::vector<outcome> batch = {stale, coalesced(rows_[1], rows_[2])};
  const auto report = writer.write(batch);
  EXPECT_EQ(report.applied, 1);
  EXPECT_EQ(report.lost_leases, std::vector<std::int64_t>{rows_[0].id});
  EXPECT_EQ(query_text(db_, of_row("status", rows_[0].id)), "pending");
  EXPECT_TRUE(query_is_null(db_, of_row("coalesced_into", rows_[0].id)));
  EXPECT_TRUE(query_is_null(db_, of_row("last_error", rows_[0].id)));
  EXPECT_EQ(query_double(db_, of_row("locked_until", rows_[0].id)), rows_[0].lease);
  EXPECT_EQ(query_int(db_, of_row("coalesced_into", rows_[1].id)), rows_[2].id);
}

TEST_F(ReliefOutcomes, AttemptRecordsNameTheBatch) {
  outcome_writer writer(db_);
  auto outs = post(std::span(rows_).subspan(0, 3), 100);
  const auto single = post(std::span(rows_).subspan(3, 1), 101);
  outs.insert(outs.end(), single.begin(), single.end());
  EXPECT_EQ(writer.write(outs).applied, 4);
  const auto lead = std::to_string(rows_[0].id);
  EXPECT_EQ(query_int(db_, "SELECT COUNT(*) FROM surge_attempt WHERE batch_lead = " + lead), 3);
  EXPECT_EQ(query_int(db_, "SELECT MIN(batch_size) FROM surge_attempt WHERE batch_lead = " + lead),
            3);
  const auto alone = " FROM surge_attempt WHERE delivery_id = " + std::to_string(rows_[3].id);
  EXPECT_TRUE(query_is_null(db_, "SELECT batch_lead" + alone));
  EXPECT_EQ(query_int(db_, "SELECT batch_size" + alone), 1);
}

TEST_F(ReliefOutcomes, AuditCountsABatchPostOnceAndItsRowsApart) {
  // Rate 2/s, burst 1: 4 requests may start within any second. Two batch POSTs of 3 rows and
  // one single row within 0.9 s are 3 requests, 7 rows: conforming by POSTs, as the partner
  // counts, and a violation if rows were counted.
  outcome_writer writer(db_);
  std::vector<outcome> outs = post(std::span(rows_).subspan(0, 3), 100);
  for (auto&& more : {post(std::span(rows_).subspan(3, 3), 100.5),
                      post(std::span(rows_).subspan(6, 1), 100.9, 500)}) {
    outs.insert(outs.end(), more.begin(), more.end());
  }
  ASSERT_EQ(writer.write(outs).applied, 7);
  const auto audit = read_audit(db_);
  ASSERT_EQ(audit.size(), 1u);
  const auto& a = audit[0].summary;
  EXPECT_EQ(a.attempts, 3);
  EXPECT_EQ(a.rows, 7);
  EXPECT_EQ(a.successes, 2);
  EXPECT_EQ(a.max_per_1s, 3);
  EXPECT_DOUBLE_EQ(a.allowed_per_1s, 4);
  EXPECT_EQ(a.max_per_60s, 3);
  EXPECT_FALSE(a.violation);
  EXPECT_DOUBLE_EQ(a.first_started_at, 100);
  EXPECT_DOUBLE_EQ(a.last_started_at, 100.9);
}

TEST_F(ReliefOutcomes, StatsCountCoalescedRowsAmongTheDone) {
  outcome_writer writer(db_);
  std::vector<outcome> outs = {coalesced(rows_[0], rows_[2]), coalesced(rows_[1], rows_[2])};
  const auto sent = post(std::span(rows_).subspan(2, 1), 100);
  outs.insert(outs.end(), sent.begin(), sent.end());
  ASSERT_EQ(writer.write(outs).applied, 3);
  const auto stats = read_stats(db_, 200);
  ASSERT_EQ(stats.per_subscriber.size(), 1u);
  EXPECT_EQ(stats.per_subscriber[0].done, 3);
  EXPECT_EQ(stats.per_subscriber[0].coalesced, 2);
  EXPECT_EQ(stats.total.coalesced, 2);
  EXPECT_EQ(stats.total.done, 3);
  EXPECT_EQ(stats.total.pending, 4);
}

TEST(ReliefStats, VersionTwoFileHasNoCoalescedRows) {
  testing::temp_dir dir;
  SQLite::Database db = testing::open_migrated(dir.file("queue.db"));
  testing::drop_version_three(db);
  const auto sub = testing::insert_subscriber_old(db);
  testing::insert_deliveries_old(db, sub, 2, 10);
  db.exec("UPDATE webhook_delivery SET status = 'done' WHERE id = 1");
  const auto stats = read_stats(db, 200);
  EXPECT_EQ(stats.total.done, 1);
  EXPECT_EQ(stats.total.pending, 1);
  EXPECT_EQ(stats.total.coalesced, 0);
}

}  // namespace
}  // namespace surge::storage::sqlite
