#include "proto/clock.hpp"
#include "storage/sqlite/schema.hpp"

#include <set>
#include <string>

#include <SQLiteCpp/Statement.h>
#include <gtest/gtest.h>

#include "storage/sqlite/database.hpp"
#include "tests/storage/test_db.hpp"

namespace surge::storage::sqlite {
namespace {

using testing::query_double;
using testing::query_int;
using testing::query_is_null;
using testing::query_text;

std::set<std::string> columns(SQLite::Database& db, const std::string& table) {
  SQLite::Statement query(db, "SELECT name FROM pragma_table_info(?)");
  query.bind(1, table);
  std::set<std::string> names;
  while (query.executeStep()) names.insert(query.getColumn(0).getString());
  return names;
}

bool has_index(SQLite::Database& db, const std::string& name) {
  SQLite::Statement query(db, "SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?");
  query.bind(1, name);
  return query.executeStep();
}

std::string schema_dump(SQLite::Database& db) {
  SQLite::Statement query(db, "SELECT type, name, sql FROM sqlite_master ORDER BY type, name");
  std::string dump;
  while (query.executeStep()) {
    dump += query.getColumn(0).getString() + " " + query.getColumn(1).getString() + " " +
            query.getColumn(2).getString() + "\n";
  }
  return dump;
}

void expect_fully_migrated(SQLite::Database& db) {
  EXPECT_EQ(schema_version(db), latest_schema_version());
  EXPECT_EQ(columns(db, "webhook_subscriber"),
            (std::set<std::string>{"id", "url", "secret", "event_types", "rate_per_sec", "burst",
                                   "tokens", "tokens_updated_at", "active", "signing",
                                   "max_in_flight", "batch_max", "batch_bytes", "batch_linger",
                                   "coalesce_key", "coalesce_window", "coalesce_events"}));
  EXPECT_EQ(
      columns(db, "webhook_delivery"),
      (std::set<std::string>{"id", "subscriber_id", "event_type", "payload", "status", "attempts",
                             "next_attempt_at", "locked_until", "created_at", "last_status",
                             "last_error", "delivered_at", "coalesced_into", "coalesced_since"}));
  EXPECT_EQ(columns(db, "surge_attempt"),
            (std::set<std::string>{"id", "delivery_id", "subscriber_id", "attempt", "started_at",
                                   "finished_at", "status_code", "error_class", "batch_lead",
                                   "batch_size"}));
  EXPECT_EQ(columns(db, "surge_drainer"),
            (std::set<std::string>{"name", "subscribers", "started_at", "seen_at", "expires_at"}));
  EXPECT_EQ(columns(db, "surge_owner"),
            (std::set<std::string>{"subscriber_id", "drainer", "fence", "taken_at"}));
  EXPECT_EQ(columns(db, "surge_lease"), (std::set<std::string>{"lease", "owner", "claimed_at"}));
  EXPECT_EQ(
      columns(db, "surge_partner_quota"),
      (std::set<std::string>{"subscriber_id", "form", "quota", "window_seconds", "remaining",
                             "reset_at", "seen_at", "paced_rate", "paced_burst", "paced_until"}));
  EXPECT_EQ(
      columns(db, "surge_subscriber_credential"),
      (std::set<std::string>{"subscriber_id", "headers", "client_cert", "client_key", "proxy"}));
  EXPECT_TRUE(has_index(db, "idx_delivery_due"));
  EXPECT_TRUE(has_index(db, "idx_delivery_subscriber_due"));
  // The attempt records' only index follows the write order (migration 5).
  EXPECT_TRUE(has_index(db, "idx_attempt_started"));
  EXPECT_FALSE(has_index(db, "idx_attempt_subscriber_started"));
  EXPECT_EQ(query_int(db,
                      "SELECT COUNT(*) FROM pragma_index_list('surge_attempt') il "
                      "JOIN pragma_index_info(il.name) ii "
                      "WHERE ii.seqno = 0 AND ii.name = 'started_at'"),
            1);
  EXPECT_EQ(query_int(db,
                      "SELECT COUNT(*) FROM pragma_index_list('webhook_delivery') "
                      "WHERE name = 'idx_delivery_subscriber_due' AND partial = 1"),
            1);
}

TEST(Schema, EmptyFileGetsSharedTablesAndMigrations) {
  testing::temp_dir dir;
  SQLite::Database db = testing::open_migrated(dir.file("queue.db"));
  expect_fully_migrated(db);
  EXPECT_EQ(latest_schema_version(), 10);
  EXPECT_EQ(query_int(db, "SELECT COUNT(*) FROM surge_schema_version"), latest_schema_version());
  EXPECT_EQ(query_int(db, "SELECT MIN(version) FROM surge_schema_version"), 1);
  EXPECT_EQ(query_int(db, "SELECT MAX(version) FROM surge_schema_version"), 10);
  EXPECT_NEAR(query_double(db, "SELECT MAX(applied_at) FROM surge_schema_version"),
              proto::unix_now(), 60);
}

TEST(Schema, UnmigratedSharedFileIsVersionZero) {
  testing::temp_dir dir;
  SQLite::Database db(dir.file("queue.db"), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
  testing::create_shared_tables(db);
  EXPECT_EQ(schema_version(db), 0);
}

TEST(Schema, FileFromSharedDdlKeepsItsRowsAndGetsDefaults) {
  testing::temp_dir dir;
  const auto path = dir.file("queue.db");
  {
    SQLite::Database other(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    testing::create_shared_tables(other);
    testing::insert_subscriber_old(other, "video.*", 2.5, 7);
    testing::insert_deliveries_old(other, 1, 3, 1000.0);
    other.exec("UPDATE webhook_delivery SET status = 'done', attempts = 2 WHERE id = 2");
  }
  SQLite::Database db = testing::open_migrated(path);
  expect_fully_migrated(db);

  EXPECT_EQ(query_text(db, "SELECT event_types FROM webhook_subscriber WHERE id = 1"), "video.*");
  EXPECT_EQ(query_double(db, "SELECT rate_per_sec FROM webhook_subscriber WHERE id = 1"), 2.5);
  EXPECT_EQ(query_int(db, "SELECT burst FROM webhook_subscriber WHERE id = 1"), 7);
  EXPECT_EQ(query_text(db, "SELECT signing FROM webhook_subscriber WHERE id = 1"), "vvv");
  EXPECT_EQ(query_int(db, "SELECT max_in_flight FROM webhook_subscriber WHERE id = 1"), 0);

  EXPECT_EQ(query_int(db, "SELECT COUNT(*) FROM webhook_delivery"), 3);
  EXPECT_EQ(query_text(db, "SELECT status FROM webhook_delivery WHERE id = 2"), "done");
  EXPECT_EQ(query_int(db, "SELECT attempts FROM webhook_delivery WHERE id = 2"), 2);
  EXPECT_EQ(query_text(db, "SELECT payload FROM webhook_delivery WHERE id = 3"), "{\"n\":2}");
  EXPECT_TRUE(query_is_null(db, "SELECT last_status FROM webhook_delivery WHERE id = 1"));
  EXPECT_TRUE(query_is_null(db, "SELECT last_error FROM webhook_delivery WHERE id = 1"));
  EXPECT_TRUE(query_is_null(db, "SELECT delivered_at FROM webhook_delivery WHERE id = 1"));
}

TEST(Schema, MigratingTwiceChangesNothing) {
  testing::temp_dir dir;
  SQLite::Database db = testing::open_migrated(dir.file("queue.db"));
  const std::string before = schema_dump(db);
  const int changes_before = db.getTotalChanges();
  EXPECT_EQ(migrate(db), latest_schema_version());
  EXPECT_EQ(schema_dump(db), before);
  EXPECT_EQ(db.getTotalChanges(), changes_before);
  EXPECT_EQ(query_int(db, "SELECT COUNT(*) FROM surge_schema_version"), latest_schema_version());

  // A second connection (another Surge process starting) sees the work done too.
  SQLite::Database again = testing::open_migrated(dir.file("queue.db"));
  EXPECT_EQ(schema_dump(again), before);
}

TEST(Schema, ColumnAddedEarlierDoesNotBreakTheMigration) {
  testing::temp_dir dir;
  const auto path = dir.file("queue.db");
  {
    SQLite::Database other(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    testing::create_shared_tables(other);
    other.exec("ALTER TABLE webhook_subscriber ADD COLUMN signing TEXT NOT NULL DEFAULT 'vvv'");
    other.exec("ALTER TABLE webhook_delivery ADD COLUMN last_error TEXT");
  }
  SQLite::Database db = testing::open_migrated(path);
  expect_fully_migrated(db);
}

TEST(Schema, VersionTwoAppliesOnAVersionOneFile) {
  testing::temp_dir dir;
  const auto path = dir.file("queue.db");
  {
    // What a Surge build with only migration 1 left behind, with rows in it.
    SQLite::Database v1 = testing::open_migrated(path);
    v1.exec("DROP TABLE surge_lease");
    testing::drop_version_three(v1);
    v1.exec("DELETE FROM surge_schema_version WHERE version = 2");
    ASSERT_EQ(schema_version(v1), 1);
    testing::insert_subscriber_old(v1);
    testing::insert_deliveries_old(v1, 1, 2, 100.0);
    v1.exec("UPDATE webhook_delivery SET last_status = 500, last_error = 'HTTP 500' WHERE id = 1");
  }
  SQLite::Database db = testing::open_migrated(path);
  expect_fully_migrated(db);
  EXPECT_EQ(query_int(db, "SELECT COUNT(*) FROM surge_schema_version"), latest_schema_version());
  EXPECT_EQ(query_int(db, "SELECT COUNT(*) FROM webhook_delivery"), 2);
  EXPECT_EQ(query_text(db, "SELECT last_error FROM webhook_delivery WHERE id = 1"), "HTTP 500");
  EXPECT_EQ(query_int(db, "SELECT COUNT(*) FROM surge_lease"), 0);
}

TEST(Schema, VersionFiveMovesTheAttemptIndexOffTheSubscriberAndKeepsTheRecords) {
  testing::temp_dir dir;
  const auto path = dir.file("queue.db");
  {
    // A version 4 file with attempt records under the old index.
    SQLite::Database v4 = testing::open_migrated(path);
    v4.exec("DROP INDEX idx_attempt_started");
    v4.exec(
        "CREATE INDEX idx_attempt_subscriber_started ON surge_attempt(subscriber_id, "
        "started_at)");
    v4.exec("DELETE FROM surge_schema_version WHERE version >= 5");
    ASSERT_EQ(schema_version(v4), 4);
    v4.exec(
        "INSERT INTO surge_attempt(delivery_id, subscriber_id, attempt, started_at, "
        "finished_at) VALUES (1, 1, 1, 100, 101), (2, 1, 1, 102, 103)");
  }
  SQLite::Database db = testing::open_migrated(path);
  expect_fully_migrated(db);
  EXPECT_EQ(query_int(db, "SELECT COUNT(*) FROM surge_attempt"), 2);
}

TEST(Schema, EveryVersionAppliesOnTheSharedDdlFile) {
  testing::temp_dir dir;
  const auto path = dir.file("queue.db");
  {
    SQLite::Database other(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    testing::create_shared_tables(other);
  }
  SQLite::Database db = testing::open_migrated(path);
  expect_fully_migrated(db);
  EXPECT_EQ(query_int(db, "SELECT COUNT(*) FROM surge_schema_version"), latest_schema_version());
  // surge_lease is keyed by the lease value, so stats can join on locked_until.
  EXPECT_EQ(query_int(db, "SELECT pk FROM pragma_table_info('surge_lease') WHERE name = 'lease'"),
            1);
}

// One of Surge's own tables dropped after the version was recorded (by an operator, another
// tool): migrate finds the schema incomplete and runs its idempotent steps again.
TEST(Schema, MigrateRestoresAnOwnTableDroppedAfterTheVersionWasRecorded) {
  testing::temp_dir dir;
  const auto path = dir.file("queue.db");
  {
    SQLite::Database db = testing::open_migrated(path);
    db.exec(
        "INSERT INTO surge_attempt(delivery_id, subscriber_id, attempt, started_at, "
        "finished_at) VALUES (1, 1, 1, 100, 101)");
    db.exec("DROP TABLE surge_owner");
  }
  SQLite::Database db = testing::open_migrated(path);
  expect_fully_migrated(db);
  EXPECT_TRUE(db.tableExists("surge_owner"));
  EXPECT_EQ(query_int(db, "SELECT COUNT(*) FROM surge_attempt"), 1) << "nothing else changes";
  EXPECT_EQ(query_int(db, "SELECT COUNT(*) FROM surge_schema_version"), latest_schema_version());
}

}  // namespace
}  // namespace surge::storage::sqlite
