#include "storage/sqlite/schema.hpp"

#include <string>
#include <vector>

#include <SQLiteCpp/Statement.h>
#include <SQLiteCpp/Transaction.h>

#include "proto/clock.hpp"
#include "storage/sqlite/database.hpp"
#include "storage/sqlite/ordered_keys.hpp"

namespace surge::storage::sqlite {
namespace {

// The shared DDL (docs/design.md), verbatim apart from IF NOT EXISTS, so an empty file ends
// up exactly like a production file before Surge's migrations run.
constexpr const char* shared_ddl = R"sql(
CREATE TABLE IF NOT EXISTS webhook_subscriber (
  id INTEGER PRIMARY KEY, url TEXT NOT NULL, secret TEXT NOT NULL,
  event_types TEXT NOT NULL DEFAULT '*',           -- '*', exact types, 'video.*' prefixes, comma-separated
  rate_per_sec REAL NOT NULL DEFAULT 5.0,          -- a per-minute limit is rate_per_sec = n/60
  burst INTEGER NOT NULL DEFAULT 10,
  tokens REAL NOT NULL DEFAULT 10.0,               -- persisted bucket, used by the steady-state drainer
  tokens_updated_at REAL NOT NULL DEFAULT 0,
  active INTEGER NOT NULL DEFAULT 1);
CREATE TABLE IF NOT EXISTS webhook_delivery (
  id INTEGER PRIMARY KEY,
  subscriber_id INTEGER NOT NULL REFERENCES webhook_subscriber(id),
  event_type TEXT NOT NULL, payload TEXT NOT NULL, -- payload: the exact bytes to POST
  status TEXT NOT NULL DEFAULT 'pending',          -- pending | retry | done | dead
  attempts INTEGER NOT NULL DEFAULT 0,
  next_attempt_at REAL NOT NULL DEFAULT 0,         -- due when next_attempt_at <= now
  locked_until REAL NOT NULL DEFAULT 0,            -- lease; free when locked_until <= now
  created_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS idx_delivery_due ON webhook_delivery(status, next_attempt_at)
  WHERE status IN ('pending', 'retry');
CREATE TABLE IF NOT EXISTS surge_schema_version (
  version INTEGER PRIMARY KEY, applied_at REAL NOT NULL);
)sql";

struct added_column {
  const char* table;
  const char* name;
  const char* definition;
};

// One migration: columns are added only when missing (another tool or an interrupted manual
// fix may have added one already); the statements must be idempotent (IF NOT EXISTS).
struct migration {
  int version;
  std::vector<added_column> columns;
  const char* statements;
};

// Additive only: never rename, drop or retype, so the other drainer's
// statements keep working on a migrated file.
const std::vector<migration>& migrations() {
  static const std::vector<migration> all = {
      {1,
       {
           {"webhook_subscriber", "signing", "TEXT NOT NULL DEFAULT 'vvv'"},
           {"webhook_subscriber", "max_in_flight", "INTEGER NOT NULL DEFAULT 0"},
           {"webhook_delivery", "last_status", "INTEGER"},
           {"webhook_delivery", "last_error", "TEXT"},
           {"webhook_delivery", "delivered_at", "REAL"},
       },
       R"sql(
CREATE TABLE IF NOT EXISTS surge_attempt (
  id INTEGER PRIMARY KEY, delivery_id INTEGER NOT NULL, subscriber_id INTEGER NOT NULL,
  attempt INTEGER NOT NULL, started_at REAL NOT NULL, finished_at REAL NOT NULL,
  status_code INTEGER, error_class TEXT);
CREATE INDEX IF NOT EXISTS idx_attempt_subscriber_started
  ON surge_attempt(subscriber_id, started_at);
CREATE INDEX IF NOT EXISTS idx_delivery_subscriber_due
  ON webhook_delivery(subscriber_id, next_attempt_at) WHERE status IN ('pending','retry');
)sql"},
      // Who holds which lease value, so `surge stats` can say whose rows are leased; rows
      // leased under a value not listed here belong to the steady-state drainer.
      {2,
       {},
       R"sql(
CREATE TABLE IF NOT EXISTS surge_lease (
  lease REAL PRIMARY KEY, owner TEXT NOT NULL, claimed_at REAL NOT NULL);
)sql"},
      // Batches and coalescing (opt-in per subscriber; the defaults keep both off). A row
      // coalesced away names the row sent in its place; an attempt made as part of a batch POST
      // names the batch's first row, so POSTs and rows can be counted apart.
      {3,
       {
           {"webhook_subscriber", "batch_max", "INTEGER NOT NULL DEFAULT 1"},
           {"webhook_subscriber", "batch_bytes", "INTEGER NOT NULL DEFAULT 1048576"},
           {"webhook_subscriber", "batch_linger", "REAL NOT NULL DEFAULT 0.5"},
           {"webhook_subscriber", "coalesce_key", "TEXT NOT NULL DEFAULT ''"},
           {"webhook_subscriber", "coalesce_window", "REAL NOT NULL DEFAULT 10"},
           {"webhook_subscriber", "coalesce_events", "TEXT NOT NULL DEFAULT '*'"},
           {"webhook_delivery", "coalesced_into", "INTEGER"},
           {"surge_attempt", "batch_lead", "INTEGER"},
           {"surge_attempt", "batch_size", "INTEGER NOT NULL DEFAULT 1"},
       },
       ""},
      // Ownership leases (several drainers on one queue): a drainer's heartbeat, and which
      // drainer owns each subscriber. An ownership lives as long as its drainer's heartbeat;
      // `fence` counts the takes, and drainer '' means released.
      {4,
       {},
       R"sql(
CREATE TABLE IF NOT EXISTS surge_drainer (
  name TEXT PRIMARY KEY, subscribers TEXT NOT NULL, started_at REAL NOT NULL,
  seen_at REAL NOT NULL, expires_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS surge_owner (
  subscriber_id INTEGER PRIMARY KEY, drainer TEXT NOT NULL, fence INTEGER NOT NULL,
  taken_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS idx_owner_drainer ON surge_owner(drainer);
)sql"},
      // Attempt records indexed in the order they are written: an index led by
      // subscriber_id takes one page write per subscriber per commit, about a seventh of the
      // drain's WAL frames; started_at only grows, so its index appends. `surge audit`, the one
      // reader by subscriber, sorts instead.
      {5,
       {},
       R"sql(
DROP INDEX IF EXISTS idx_attempt_subscriber_started;
CREATE INDEX IF NOT EXISTS idx_attempt_started ON surge_attempt(started_at);
)sql"},
      // Coalescing's window counts along chains of merges: a row that stands for rows merged
      // into it keeps the created_at of the oldest of them, so merging it again later is
      // allowed only while that one is within the window.
      {6, {{"webhook_delivery", "coalesced_since", "REAL"}}, ""},
      // The quota each partner last announced in its responses and the pace drawn from it, so
      // that `surge stats` (another process) can show where it and the configured limit
      // disagree. One row per subscriber, replaced as new announcements come.
      {7,
       {},
       R"sql(
CREATE TABLE IF NOT EXISTS surge_partner_quota (
  subscriber_id INTEGER PRIMARY KEY, form TEXT NOT NULL, quota INTEGER, window_seconds REAL,
  remaining INTEGER NOT NULL, reset_at REAL NOT NULL, seen_at REAL NOT NULL,
  paced_rate REAL NOT NULL, paced_burst REAL NOT NULL, paced_until REAL NOT NULL DEFAULT 0);
)sql"},
      // What some partners require besides the signature: extra request headers ("Name: value"
      // lines) and a TLS client certificate and key (PEM file paths, never their contents). In a
      // table of Surge's own, keyed by subscriber id, so either shape's subscriber table stays
      // as its producer made it. SQLite hands the id of the highest deleted row to the next
      // insert, so a subscriber's credentials are deleted with it by a trigger; otherwise the
      // next partner would inherit its Authorization header and client certificate. The
      // trigger only adds to the producer's DELETE: its statements stay as they were.
      {8,
       {},
       R"sql(
CREATE TABLE IF NOT EXISTS surge_subscriber_credential (
  subscriber_id INTEGER PRIMARY KEY, headers TEXT NOT NULL DEFAULT '',
  client_cert TEXT NOT NULL DEFAULT '', client_key TEXT NOT NULL DEFAULT '');
CREATE TRIGGER IF NOT EXISTS surge_subscriber_credential_gone
  AFTER DELETE ON webhook_subscriber BEGIN
  DELETE FROM surge_subscriber_credential WHERE subscriber_id = OLD.id;
END;
)sql"},
      // Ordered delivery per key (opt-in per subscriber, proto/ordered_delivery.hpp): the key's
      // JSON pointer and what a dead row does to its key, and the keys stopped by a dead row
      // until the operator replays that row or skips it. Both go with a deleted subscriber, as
      // its credentials do. The index the ordered claim reads is made only while a subscriber
      // is ordered (storage/ordered_keys.hpp): every other drain would pay for its upkeep.
      {9,
       {},
       [] {
         static const std::string ddl = ordered_tables_ddl("webhook_subscriber");
         return ddl.c_str();
       }()},
      // The egress proxy a partner's connections leave through (`subscriber set --proxy`).
      {10, {{"surge_subscriber_credential", "proxy", "TEXT NOT NULL DEFAULT ''"}}, ""},
  };
  return all;
}

// The tables of Surge's own that the migrations create.
constexpr const char* surge_tables[] = {"surge_attempt",          "surge_lease",
                                        "surge_drainer",          "surge_owner",
                                        "surge_partner_quota",    "surge_subscriber_credential",
                                        "surge_subscriber_order", "surge_stopped_key"};
// And the triggers they create.
constexpr const char* surge_triggers[] = {"surge_subscriber_credential_gone",
                                          "surge_subscriber_order_gone"};

bool has_column(SQLite::Database& db, const char* table, const char* column) {
  SQLite::Statement query(db, "SELECT 1 FROM pragma_table_info(?) WHERE name = ?");
  query.bind(1, table);
  query.bind(2, column);
  return query.executeStep();
}

bool has_trigger(SQLite::Database& db, const char* name) {
  SQLite::Statement query(db, "SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = ?");
  query.bind(1, name);
  return query.executeStep();
}

void apply(SQLite::Database& db, const migration& step) {
  SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
  // Re-read under the write lock: another process may have migrated since we looked.
  if (schema_version(db) >= step.version) return;
  for (const auto& column : step.columns) {
    if (has_column(db, column.table, column.name)) continue;
    db.exec(std::string("ALTER TABLE ") + column.table + " ADD COLUMN " + column.name + " " +
            column.definition);
  }
  db.exec(step.statements);
  SQLite::Statement record(db,
                           "INSERT INTO surge_schema_version(version, applied_at) VALUES (?, ?)");
  record.bind(1, step.version);
  record.bind(2, proto::unix_now());
  record.exec();
  transaction.commit();
}

// Whether everything the migrations add is there: another program or an operator may have
// dropped one of Surge's tables after the version was recorded.
bool schema_complete(SQLite::Database& db) {
  for (const char* table : surge_tables) {
    if (!db.tableExists(table)) return false;
  }
  for (const char* trigger : surge_triggers) {
    if (!has_trigger(db, trigger)) return false;
  }
  for (const auto& step : migrations()) {
    for (const auto& column : step.columns) {
      if (!has_column(db, column.table, column.name)) return false;
    }
  }
  return true;
}

// Every step again, without recording versions: each is idempotent.
void repair(SQLite::Database& db) {
  SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
  db.exec(shared_ddl);
  for (const auto& step : migrations()) {
    for (const auto& column : step.columns) {
      if (has_column(db, column.table, column.name)) continue;
      db.exec(std::string("ALTER TABLE ") + column.table + " ADD COLUMN " + column.name + " " +
              column.definition);
    }
    db.exec(step.statements);
  }
  transaction.commit();
}

}  // namespace

std::vector<found_table> list_tables(SQLite::Database& db) {
  SQLite::Statement query(db,
                          "SELECT m.name, p.name FROM sqlite_master m "
                          "LEFT JOIN pragma_table_info(m.name) p "
                          "WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite\\_%' ESCAPE '\\' "
                          "ORDER BY m.name, p.cid");
  std::vector<found_table> tables;
  while (query.executeStep()) {
    const std::string name = query.getColumn(0).getString();
    if (tables.empty() || tables.back().name != name) tables.push_back({name, {}});
    if (!query.getColumn(1).isNull()) {
      tables.back().columns.push_back(query.getColumn(1).getString());
    }
  }
  return tables;
}

std::vector<std::pair<std::string, std::string>> list_indexes_and_triggers(SQLite::Database& db) {
  SQLite::Statement query(db,
                          "SELECT type, name FROM sqlite_master WHERE type IN ('index', 'trigger') "
                          "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY type, name");
  std::vector<std::pair<std::string, std::string>> out;
  while (query.executeStep()) {
    out.emplace_back(query.getColumn(0).getString(), query.getColumn(1).getString());
  }
  return out;
}

int schema_version(SQLite::Database& db) {
  if (!db.tableExists("surge_schema_version")) return 0;
  return db.execAndGet("SELECT COALESCE(MAX(version), 0) FROM surge_schema_version").getInt();
}

int latest_schema_version() { return migrations().back().version; }

int migrate(SQLite::Database& db) {
  // Up to date: take no write lock at all, so starting Surge never waits on the other drainer.
  if (schema_version(db) >= latest_schema_version()) {
    if (!schema_complete(db)) repair(db);
    return schema_version(db);
  }
  {
    SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
    db.exec(shared_ddl);
    transaction.commit();
  }
  for (const auto& step : migrations()) {
    if (schema_version(db) < step.version) apply(db, step);
  }
  return schema_version(db);
}

}  // namespace surge::storage::sqlite
