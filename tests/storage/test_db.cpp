#include "test_db.hpp"

#include <SQLiteCpp/Statement.h>
#include <SQLiteCpp/Transaction.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "storage/sqlite/database.hpp"
#include "storage/sqlite/schema.hpp"
#include "tests/storage/sqlite/other_drainer_sql.hpp"
#include "tests/support/shared_ddl.hpp"

namespace surge::storage::testing {

using namespace surge::storage::sqlite;

SQLite::Database open_migrated(const std::string& path, std::chrono::milliseconds busy_timeout) {
  database_config config;
  config.path = path;
  config.busy_timeout = busy_timeout;
  SQLite::Database db = open_database(config);
  migrate(db);
  return db;
}

void create_shared_tables(SQLite::Database& db) { db.exec(surge::testing::shared_ddl); }

void drop_version_three(SQLite::Database& db) {
  // Listed here, not taken from storage/sqlite/schema.cpp, so a column migration 3 stops adding
  // shows.
  static constexpr const char* columns[][2] = {{"webhook_subscriber", "batch_max"},
                                               {"webhook_subscriber", "batch_bytes"},
                                               {"webhook_subscriber", "batch_linger"},
                                               {"webhook_subscriber", "coalesce_key"},
                                               {"webhook_subscriber", "coalesce_window"},
                                               {"webhook_subscriber", "coalesce_events"},
                                               {"webhook_delivery", "coalesced_into"},
                                               {"surge_attempt", "batch_lead"},
                                               {"surge_attempt", "batch_size"}};
  for (const auto& [table, column] : columns) {
    db.exec(std::string("ALTER TABLE ") + table + " DROP COLUMN " + column);
  }
  db.exec("DELETE FROM surge_schema_version WHERE version = 3");
  // A build without migration 3 had none of the later ones either.
  db.exec(
      "DROP TABLE surge_owner; DROP TABLE surge_drainer;"
      "DELETE FROM surge_schema_version WHERE version > 3");
}

std::int64_t insert_subscriber_old(SQLite::Database& db, const std::string& event_types,
                                   double rate_per_sec, int burst) {
  SQLite::Statement insert(db, other_drainer_sql::insert_subscriber);
  insert.bind(1, "https://partner.example/hook");
  insert.bind(2, "secret");
  insert.bind(3, event_types);
  insert.bind(4, rate_per_sec);
  insert.bind(5, burst);
  insert.exec();
  return db.getLastInsertRowid();
}

std::vector<std::int64_t> insert_deliveries_old(SQLite::Database& db, std::int64_t subscriber_id,
                                                int count, double due,
                                                const std::string& event_type) {
  std::vector<std::int64_t> ids;
  SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
  SQLite::Statement insert(db, other_drainer_sql::insert_delivery);
  for (int i = 0; i < count; ++i) {
    insert.reset();
    insert.bind(1, subscriber_id);
    insert.bind(2, event_type);
    insert.bind(3, "{\"n\":" + std::to_string(i) + "}");
    insert.bind(4, due);
    insert.bind(5, due);
    insert.exec();
    ids.push_back(db.getLastInsertRowid());
  }
  transaction.commit();
  return ids;
}

std::int64_t query_int(SQLite::Database& db, const std::string& sql) {
  return db.execAndGet(sql).getInt64();
}

double query_double(SQLite::Database& db, const std::string& sql) {
  return db.execAndGet(sql).getDouble();
}

std::string query_text(SQLite::Database& db, const std::string& sql) {
  return db.execAndGet(sql).getString();
}

bool query_is_null(SQLite::Database& db, const std::string& sql) {
  return db.execAndGet(sql).isNull();
}

}  // namespace surge::storage::testing
