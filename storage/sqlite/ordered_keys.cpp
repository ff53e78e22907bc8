#include "storage/sqlite/ordered_keys.hpp"

#include <map>

#include <SQLiteCpp/Statement.h>

#include "storage/sqlite/sql_support.hpp"

namespace surge::storage::sqlite {

std::string ordered_tables_ddl(std::string_view subscriber_table) {
  return R"sql(
CREATE TABLE IF NOT EXISTS surge_subscriber_order (
  subscriber_id INTEGER PRIMARY KEY, key_pointer TEXT NOT NULL,
  dead_key TEXT NOT NULL DEFAULT 'skip');
CREATE TABLE IF NOT EXISTS surge_stopped_key (
  subscriber_id INTEGER NOT NULL, order_key TEXT NOT NULL, delivery_id INTEGER NOT NULL,
  stopped_at REAL NOT NULL, PRIMARY KEY (subscriber_id, order_key));
CREATE TRIGGER IF NOT EXISTS surge_subscriber_order_gone
  AFTER DELETE ON )sql" +
         std::string(subscriber_table) + R"sql( BEGIN
  DELETE FROM surge_subscriber_order WHERE subscriber_id = OLD.id;
  DELETE FROM surge_stopped_key WHERE subscriber_id = OLD.id;
END;
)sql";
}

const ordered_index& seed000_ordered_index() {
  // Led by subscriber_id, rowid implied: a subscriber's unfinished rows in enqueue order, read
  // from wherever the last one finished without a sort.
  static const ordered_index index{
      .create =
          "CREATE INDEX IF NOT EXISTS surge_delivery_subscriber_order ON "
          "webhook_delivery(subscriber_id) WHERE status IN ('pending','retry')",
      .drop = "DROP INDEX IF EXISTS surge_delivery_subscriber_order",
  };
  return index;
}

void set_subscriber_order(SQLite::Database& db, std::int64_t subscriber_id,
                          const std::optional<proto::order_rule>& rule,
                          const ordered_index& index) {
  sqlite::write_transaction transaction(db);
  if (rule) {
    SQLite::Statement upsert(db,
                             "INSERT OR REPLACE INTO surge_subscriber_order(subscriber_id, "
                             "key_pointer, dead_key) VALUES (?, ?, ?)");
    upsert.bind(1, subscriber_id);
    upsert.bind(2, rule->pointer);
    upsert.bind(3, std::string(proto::dead_key_name(rule->when_dead)));
    upsert.exec();
    db.exec(index.create);
  } else {
    for (const char* table : {"surge_subscriber_order", "surge_stopped_key"}) {
      SQLite::Statement remove(db,
                               std::string("DELETE FROM ") + table + " WHERE subscriber_id = ?");
      remove.bind(1, subscriber_id);
      remove.exec();
    }
    const bool none_left =
        db.execAndGet("SELECT NOT EXISTS (SELECT 1 FROM surge_subscriber_order)").getInt() != 0;
    if (none_left) db.exec(index.drop);
  }
  transaction.commit();
}

void read_subscriber_orders(SQLite::Database& db, std::span<subscriber_row> rows) {
  if (rows.empty() || !db.tableExists("surge_subscriber_order")) return;
  std::map<std::int64_t, proto::order_rule> rules;
  SQLite::Statement query(
      db, "SELECT subscriber_id, key_pointer, dead_key FROM surge_subscriber_order");
  while (query.executeStep()) {
    proto::order_rule rule{.pointer = query.getColumn(1).getString()};
    // Another program's text there reads as the default: the key moves on.
    proto::parse_dead_key(query.getColumn(2).getString(), rule.when_dead);
    rules.emplace(query.getColumn(0).getInt64(), std::move(rule));
  }
  for (auto& row : rows) {
    const auto found = rules.find(row.id);
    if (found != rules.end()) row.order = found->second;
  }
}

std::vector<stopped_key> list_stopped_keys(SQLite::Database& db, const proto::id_set& which) {
  std::vector<stopped_key> keys;
  if (!db.tableExists("surge_stopped_key")) return keys;
  SQLite::Statement query(db,
                          "SELECT subscriber_id, order_key, delivery_id, stopped_at FROM "
                          "surge_stopped_key WHERE " +
                              detail::id_filter(which, "subscriber_id") +
                              " ORDER BY subscriber_id, stopped_at, order_key");
  while (query.executeStep()) {
    keys.push_back({.subscriber_id = query.getColumn(0).getInt64(),
                    .key = query.getColumn(1).getString(),
                    .delivery_id = query.getColumn(2).getInt64(),
                    .stopped_at = query.getColumn(3).getDouble()});
  }
  return keys;
}

int resume_stopped_keys(SQLite::Database& db, std::int64_t subscriber_id,
                        const std::optional<std::string>& key) {
  if (!db.tableExists("surge_stopped_key")) return 0;
  sqlite::write_transaction transaction(db);
  SQLite::Statement remove(db, key ? "DELETE FROM surge_stopped_key WHERE subscriber_id = ? AND "
                                     "order_key = ?"
                                   : "DELETE FROM surge_stopped_key WHERE subscriber_id = ?");
  remove.bind(1, subscriber_id);
  if (key) remove.bind(2, *key);
  const int resumed = remove.exec();
  transaction.commit();
  return resumed;
}

void resume_keys_stopped_by(SQLite::Database& db, std::span<const std::int64_t> delivery_ids) {
  if (delivery_ids.empty() || !db.tableExists("surge_stopped_key")) return;
  SQLite::Statement remove(db, "DELETE FROM surge_stopped_key WHERE delivery_id = ?");
  for (const auto id : delivery_ids) {
    sqlite::statement_use use(remove);
    remove.bind(1, id);
    remove.exec();
  }
}

}  // namespace surge::storage::sqlite
