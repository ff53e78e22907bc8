// Surge's own tables on a seed001 queue. The shape's tables (webhook_subscribers,
// webhook_deliveries, webhook_buckets) belong to its producer and worker: they are never created
// or altered here, only indexed once for per-subscriber claims, and given one trigger that
// deletes a deleted subscriber's credentials from Surge's table.
#include <SQLiteCpp/Statement.h>
#include <SQLiteCpp/Transaction.h>

#include "proto/clock.hpp"
#include "storage/seed001/queue.hpp"
#include "storage/seed001/sql.hpp"
#include "storage/sqlite/database.hpp"
#include "storage/sqlite/schema.hpp"
#include "storage/sqlite/sql_support.hpp"

namespace surge::storage::sqlite::seed001 {
namespace {

// Surge's own tables as seed000's migrations leave them, in one step, plus the notes that stand
// in for seed000's last_status/last_error columns.
constexpr const char* surge_ddl = R"sql(
CREATE TABLE IF NOT EXISTS surge_schema_version (
  version INTEGER PRIMARY KEY, applied_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS surge_attempt (
  id INTEGER PRIMARY KEY, delivery_id INTEGER NOT NULL, subscriber_id INTEGER NOT NULL,
  attempt INTEGER NOT NULL, started_at REAL NOT NULL, finished_at REAL NOT NULL,
  status_code INTEGER, error_class TEXT, batch_lead INTEGER, batch_size INTEGER NOT NULL DEFAULT 1);
CREATE INDEX IF NOT EXISTS idx_attempt_started ON surge_attempt(started_at);
CREATE TABLE IF NOT EXISTS surge_lease (
  lease REAL PRIMARY KEY, owner TEXT NOT NULL, claimed_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS surge_drainer (
  name TEXT PRIMARY KEY, subscribers TEXT NOT NULL, started_at REAL NOT NULL,
  seen_at REAL NOT NULL, expires_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS surge_owner (
  subscriber_id INTEGER PRIMARY KEY, drainer TEXT NOT NULL, fence INTEGER NOT NULL,
  taken_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS idx_owner_drainer ON surge_owner(drainer);
CREATE TABLE IF NOT EXISTS surge_partner_quota (
  subscriber_id INTEGER PRIMARY KEY, form TEXT NOT NULL, quota INTEGER, window_seconds REAL,
  remaining INTEGER NOT NULL, reset_at REAL NOT NULL, seen_at REAL NOT NULL,
  paced_rate REAL NOT NULL, paced_burst REAL NOT NULL, paced_until REAL NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS surge_subscriber_credential (
  subscriber_id INTEGER PRIMARY KEY, headers TEXT NOT NULL DEFAULT '',
  client_cert TEXT NOT NULL DEFAULT '', client_key TEXT NOT NULL DEFAULT '',
  proxy TEXT NOT NULL DEFAULT '');
-- SQLite gives a deleted subscriber's id to the next one inserted: its credentials go with it,
-- or the next partner would be sent them.
CREATE TRIGGER IF NOT EXISTS surge_subscriber_credential_gone
  AFTER DELETE ON webhook_subscribers BEGIN
  DELETE FROM surge_subscriber_credential WHERE subscriber_id = OLD.id;
END;
CREATE TABLE IF NOT EXISTS surge_delivery_note (
  delivery_id INTEGER PRIMARY KEY, last_status INTEGER, last_error TEXT, noted_at REAL NOT NULL);
-- Claims read each subscriber's oldest due rows; the shape's own index leads with state.
CREATE INDEX IF NOT EXISTS surge_deliveries_subscriber_due
  ON webhook_deliveries(subscriber_id, next_attempt) WHERE state = 'pending';
)sql";

constexpr const char* credential_trigger = "surge_subscriber_credential_gone";
constexpr const char* order_trigger = "surge_subscriber_order_gone";

constexpr const char* surge_tables[] = {"surge_schema_version",
                                        "surge_attempt",
                                        "surge_lease",
                                        "surge_drainer",
                                        "surge_owner",
                                        "surge_delivery_note",
                                        "surge_partner_quota",
                                        "surge_subscriber_credential",
                                        "surge_subscriber_order",
                                        "surge_stopped_key"};

bool complete(SQLite::Database& db) {
  for (const char* table : surge_tables) {
    if (!db.tableExists(table)) return false;
  }
  SQLite::Statement index(db, "SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?");
  index.bind(1, due_index);
  if (!index.executeStep()) return false;
  SQLite::Statement trigger(db, "SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = ?");
  for (const char* name : {credential_trigger, order_trigger}) {
    sqlite::statement_use use(trigger);
    trigger.bind(1, name);
    if (!trigger.executeStep()) return false;
  }
  return sqlite::credentials_have_proxy(db);
}

}  // namespace

int migrate(SQLite::Database& db) {
  // Up to date: no write lock at all, so starting Surge never waits on the shape's worker.
  if (schema_version(db) >= latest_schema_version() && complete(db)) return schema_version(db);
  SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
  db.exec(surge_ddl);
  // A credentials table made before the proxy column: the column is added (schema 10).
  if (!sqlite::credentials_have_proxy(db)) {
    db.exec("ALTER TABLE surge_subscriber_credential ADD COLUMN proxy TEXT NOT NULL DEFAULT ''");
  }
  db.exec(ordered_tables_ddl("webhook_subscribers"));
  SQLite::Statement record(db,
                           "INSERT OR IGNORE INTO surge_schema_version(version, applied_at) "
                           "VALUES (?, ?)");
  record.bind(1, latest_schema_version());
  record.bind(2, proto::unix_now());
  record.exec();
  transaction.commit();
  return schema_version(db);
}

}  // namespace surge::storage::sqlite::seed001
