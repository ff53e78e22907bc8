#include "test_db.hpp"

#include <atomic>
#include <random>

#include <SQLiteCpp/Statement.h>
#include <SQLiteCpp/Transaction.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "storage/database.hpp"
#include "storage/schema.hpp"
#include "tests/storage/other_drainer_sql.hpp"

namespace surge::storage::testing {

temp_dir::temp_dir() {
  static std::atomic<int> counter{0};
  std::random_device entropy;
  path_ = std::filesystem::path(::testing::TempDir()) /
          ("surge_storage_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + "_" +
           std::to_string(entropy()));
  std::filesystem::create_directories(path_);
}

temp_dir::~temp_dir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

SQLite::Database open_migrated(const std::string& path, std::chrono::milliseconds busy_timeout) {
  database_config config;
  config.path = path;
  config.busy_timeout = busy_timeout;
  SQLite::Database db = open_database(config);
  migrate(db);
  return db;
}

void create_shared_tables(SQLite::Database& db) {
  db.exec(R"sql(
CREATE TABLE webhook_subscriber (
  id INTEGER PRIMARY KEY, url TEXT NOT NULL, secret TEXT NOT NULL,
  event_types TEXT NOT NULL DEFAULT '*',           -- '*', exact types, 'video.*' prefixes, comma-separated
  rate_per_sec REAL NOT NULL DEFAULT 5.0,          -- a per-minute limit is rate_per_sec = n/60
  burst INTEGER NOT NULL DEFAULT 10,
  tokens REAL NOT NULL DEFAULT 10.0,               -- persisted bucket, used by the steady-state drainer
  tokens_updated_at REAL NOT NULL DEFAULT 0,
  active INTEGER NOT NULL DEFAULT 1);
CREATE TABLE webhook_delivery (
  id INTEGER PRIMARY KEY,
  subscriber_id INTEGER NOT NULL REFERENCES webhook_subscriber(id),
  event_type TEXT NOT NULL, payload TEXT NOT NULL, -- payload: the exact bytes to POST
  status TEXT NOT NULL DEFAULT 'pending',          -- pending | retry | done | dead
  attempts INTEGER NOT NULL DEFAULT 0,
  next_attempt_at REAL NOT NULL DEFAULT 0,         -- due when next_attempt_at <= now
  locked_until REAL NOT NULL DEFAULT 0,            -- lease; free when locked_until <= now
  created_at REAL NOT NULL);
CREATE INDEX idx_delivery_due ON webhook_delivery(status, next_attempt_at)
  WHERE status IN ('pending', 'retry');
)sql");
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
