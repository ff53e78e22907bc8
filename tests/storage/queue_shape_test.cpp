// Which published queue shape a database holds, and what Surge does with one it cannot use.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>

#include "storage/connection.hpp"
#include "storage/queue_shape.hpp"
#include "storage/sqlite/queue.hpp"
#include "storage/sqlite/schema.hpp"
#include "tests/support/seed001_ddl.hpp"
#include "tests/support/shared_ddl.hpp"
#include "tests/support/temp_dir.hpp"

namespace surge::storage {
namespace {

using sqlite::latest_schema_version;

using namespace std::chrono_literals;

std::vector<found_table> tables_of_shape(queue_shape shape) {
  std::vector<found_table> out;
  for (const auto& table : tables_of(shape)) {
    found_table found{std::string(table.name), {}};
    for (const auto column : table.columns) found.columns.emplace_back(column);
    out.push_back(std::move(found));
  }
  return out;
}

std::vector<found_table> without(std::vector<found_table> tables, const std::string& name) {
  std::erase_if(tables, [&](const found_table& t) { return t.name == name; });
  return tables;
}

TEST(QueueShape, EachCompleteShapeIsRecognised) {
  EXPECT_EQ(classify_queue(tables_of_shape(queue_shape::seed000), {}, "q.db").shape,
            queue_shape::seed000);
  EXPECT_EQ(classify_queue(tables_of_shape(queue_shape::seed001), {}, "q.db").shape,
            queue_shape::seed001);
  // Surge's own tables and other programs' tables beside a shape do not matter.
  auto with_more = tables_of_shape(queue_shape::seed001);
  with_more.push_back({"surge_attempt", {"id"}});
  with_more.push_back({"app_users", {"id"}});
  EXPECT_EQ(classify_queue(with_more, {}, "q.db").shape, queue_shape::seed001);
}

TEST(QueueShape, AnEmptyDatabaseIsRefusedSayingSo) {
  const auto finding = classify_queue({}, {}, "q.db");
  EXPECT_FALSE(finding.shape.has_value());
  EXPECT_TRUE(finding.empty);
  EXPECT_NE(finding.problem.find("the queue q.db is empty: it holds no tables"), std::string::npos)
      << finding.problem;
  EXPECT_THROW(usable_shape(finding), error);
  try {
    usable_shape(finding);
  } catch (const error& e) {
    EXPECT_EQ(e.what_kind(), error::kind::bad_shape);
  }
}

TEST(QueueShape, TablesOfNoKnownShapeAreNamedWithWhatIsMissing) {
  const std::vector<found_table> tables = {{"jobs", {"id"}}, {"surge_schema_version", {"v"}}};
  const auto finding = classify_queue(tables, {}, "q.db");
  EXPECT_FALSE(finding.shape.has_value());
  EXPECT_FALSE(finding.empty);
  EXPECT_NE(finding.problem.find("found the tables jobs, surge_schema_version"), std::string::npos)
      << finding.problem;
  EXPECT_NE(finding.problem.find("seed000 (webhook_subscriber, webhook_delivery)"),
            std::string::npos);
  EXPECT_NE(
      finding.problem.find("seed001 (webhook_subscribers, webhook_deliveries, webhook_buckets)"),
      std::string::npos);
}

TEST(QueueShape, AHalfMigratedSeed001QueueNamesTheMissingTable) {
  const auto finding =
      classify_queue(without(tables_of_shape(queue_shape::seed001), "webhook_buckets"), {}, "q.db");
  EXPECT_FALSE(finding.shape.has_value());
  EXPECT_NE(finding.problem.find("half-migrated seed001 queue: found webhook_subscribers, "
                                 "webhook_deliveries, missing webhook_buckets"),
            std::string::npos)
      << finding.problem;
}

TEST(QueueShape, AMissingColumnIsHalfMigratedToo) {
  auto tables = tables_of_shape(queue_shape::seed001);
  auto& deliveries = tables[1];
  std::erase(deliveries.columns, "signature");
  const auto finding = classify_queue(tables, {}, "q.db");
  EXPECT_FALSE(finding.shape.has_value());
  EXPECT_NE(finding.problem.find("lack the column webhook_deliveries.signature"), std::string::npos)
      << finding.problem;
}

TEST(QueueShape, BothShapesAreRefusedUntilOneIsNamed) {
  auto both = tables_of_shape(queue_shape::seed001);
  for (auto& table : tables_of_shape(queue_shape::seed000)) both.push_back(table);
  const auto unnamed = classify_queue(both, {}, "q.db");
  EXPECT_FALSE(unnamed.shape.has_value());
  EXPECT_NE(unnamed.problem.find("holds tables of both published shapes"), std::string::npos);
  EXPECT_NE(unnamed.problem.find("--queue-shape seed000 or --queue-shape seed001"),
            std::string::npos)
      << unnamed.problem;
  EXPECT_EQ(classify_queue(both, queue_shape::seed001, "q.db").shape, queue_shape::seed001);
  EXPECT_EQ(classify_queue(both, queue_shape::seed000, "q.db").shape, queue_shape::seed000);
  // One table of the other shape is enough to be ambiguous.
  auto stray = tables_of_shape(queue_shape::seed001);
  stray.push_back({"webhook_delivery", {"id"}});
  EXPECT_FALSE(classify_queue(stray, {}, "q.db").shape.has_value());
}

TEST(QueueShape, ANamedShapeMustBeThere) {
  const auto finding =
      classify_queue(tables_of_shape(queue_shape::seed000), queue_shape::seed001, "q.db");
  EXPECT_FALSE(finding.shape.has_value());
  EXPECT_NE(finding.problem.find("holds no seed001"), std::string::npos) << finding.problem;
  EXPECT_EQ(parse_queue_shape("seed001"), queue_shape::seed001);
  EXPECT_EQ(parse_queue_shape("seed000"), queue_shape::seed000);
  EXPECT_FALSE(parse_queue_shape("seed_001").has_value());
}

TEST(QueueShape, Seed001KeepsItsOwnRetryRules) {
  const auto rules = retry_defaults(queue_shape::seed001);
  EXPECT_EQ(rules.max_attempts, 12);
  EXPECT_EQ(rules.max_age, 24h);
  EXPECT_EQ(rules.rule, proto::backoff_rule::added_jitter);
  EXPECT_EQ(rules.added_jitter, 30s);
  EXPECT_EQ(rules.max_delay, 1h);
  EXPECT_EQ(retry_defaults(queue_shape::seed000).max_attempts, 8);
}

// The text of every table and index of the file, as SQLite stores it.
std::set<std::string> schema_text(const std::string& path) {
  SQLite::Database db(path);
  SQLite::Statement query(db,
                          "SELECT type || ' ' || name || ': ' || COALESCE(sql, '') FROM "
                          "sqlite_master");
  std::set<std::string> out;
  while (query.executeStep()) out.insert(query.getColumn(0).getString());
  return out;
}

bool has_table(const std::string& path, const std::string& table) {
  SQLite::Database db(path);
  return db.tableExists(table);
}

TEST(QueueShapeFile, MigrateOnASeed001FileAddsOnlySurgesOwnTables) {
  testing::temp_dir dir;
  const auto path = dir.file("seed001.db");
  {
    SQLite::Database raw(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    raw.exec(testing::seed001_ddl);
  }
  const auto before = schema_text(path);
  connection db({.location = path, .create_if_missing = false});
  EXPECT_EQ(db.shape(), queue_shape::seed001);
  EXPECT_EQ(migrate(db), latest_schema_version());
  EXPECT_FALSE(has_table(path, "webhook_subscriber"));
  EXPECT_FALSE(has_table(path, "webhook_delivery"));
  for (const char* table :
       {"surge_schema_version", "surge_attempt", "surge_lease", "surge_drainer", "surge_owner",
        "surge_delivery_note", "surge_partner_quota", "surge_subscriber_credential"}) {
    EXPECT_TRUE(has_table(path, table)) << table;
  }
  // The shape's own tables and index are as its DDL made them; what is added is Surge's.
  const auto after = schema_text(path);
  for (const auto& entry : before) EXPECT_TRUE(after.contains(entry)) << entry;
  for (const auto& entry : after) {
    if (before.contains(entry)) continue;
    // Surge's tables, their indexes (SQLite's autoindexes included) and its due index.
    EXPECT_NE(entry.find("surge_"), std::string::npos) << "not Surge's own: " << entry;
  }
  // Again: nothing to do.
  EXPECT_EQ(migrate(db), latest_schema_version());
  EXPECT_EQ(schema_text(path), after);
}

TEST(QueueShapeFile, OnlySurgeMigrateMayCreateAQueueInAnEmptyFile) {
  testing::temp_dir dir;
  const auto path = dir.file("empty.db");
  { SQLite::Database raw(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE); }
  connection db({.location = path, .create_if_missing = false});
  try {
    migrate(db);
    FAIL() << "an empty file was migrated without being asked to create a queue";
  } catch (const error& e) {
    EXPECT_EQ(e.what_kind(), error::kind::bad_shape);
    EXPECT_NE(std::string(e.what()).find("is empty"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_stats(db, 0), error);
  EXPECT_EQ(migrate(db, true), latest_schema_version());
  EXPECT_EQ(db.shape(), queue_shape::seed000);
  EXPECT_TRUE(has_table(path, "webhook_delivery"));

  // Never seed001's tables, even when asked for that shape.
  const auto other = dir.file("empty2.db");
  { SQLite::Database raw(other, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE); }
  connection named({.location = other, .create_if_missing = false, .shape = queue_shape::seed001});
  EXPECT_THROW(migrate(named, true), error);
  EXPECT_FALSE(has_table(other, "webhook_deliveries"));
  EXPECT_FALSE(has_table(other, "webhook_delivery"));
}

TEST(QueueShapeFile, AHalfMigratedSeed001FileIsNeverCompleted) {
  testing::temp_dir dir;
  const auto path = dir.file("half.db");
  {
    SQLite::Database raw(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    raw.exec(testing::seed001_ddl);
    raw.exec("DROP TABLE webhook_buckets");
  }
  connection db({.location = path, .create_if_missing = false});
  for (const bool create : {false, true}) {
    try {
      migrate(db, create);
      FAIL() << "a half-migrated seed001 file was migrated";
    } catch (const error& e) {
      EXPECT_EQ(e.what_kind(), error::kind::bad_shape);
      EXPECT_NE(std::string(e.what()).find("missing webhook_buckets"), std::string::npos)
          << e.what();
    }
  }
  EXPECT_FALSE(has_table(path, "webhook_buckets"));
  EXPECT_FALSE(has_table(path, "webhook_delivery"));
  EXPECT_FALSE(has_table(path, "surge_attempt"));
}

TEST(QueueShapeFile, AFileOfBothShapesIsUsedAsTheNamedOne) {
  testing::temp_dir dir;
  const auto path = dir.file("both.db");
  {
    SQLite::Database raw(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    raw.exec(testing::seed001_ddl);
    raw.exec(testing::shared_ddl);
    raw.exec(
        "INSERT INTO webhook_subscribers (endpoint, secret, events, region) "
        "VALUES ('https://a.example/h', 's', '[\"*\"]', 'DE')");
  }
  connection unnamed({.location = path, .create_if_missing = false});
  EXPECT_THROW(unnamed.shape(), error);
  EXPECT_THROW(migrate(unnamed), error);
  connection named({.location = path, .create_if_missing = false, .shape = queue_shape::seed001});
  EXPECT_EQ(migrate(named), latest_schema_version());
  EXPECT_EQ(named.shape(), queue_shape::seed001);
}

}  // namespace
}  // namespace surge::storage
