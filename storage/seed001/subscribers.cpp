// seed001's webhook_subscribers as neutral subscriber rows, their buckets from webhook_buckets.
#include <cmath>

#include <SQLiteCpp/Statement.h>
#include <SQLiteCpp/Transaction.h>

#include "proto/event_match.hpp"
#include "storage/seed001/queue.hpp"
#include "storage/sqlite/sql_support.hpp"
#include "storage/sqlite/subscriber_rows.hpp"

namespace surge::storage::sqlite::seed001 {
namespace {

// A subscriber without a bucket row has not been sent to yet: its bucket is full.
constexpr const char* base_columns =
    "SELECT s.id, s.endpoint, s.secret, s.events, s.rate_per_min, s.burst, b.tokens, "
    "b.updated_at, s.active, s.region";
constexpr const char* from_tables =
    " FROM webhook_subscribers s LEFT JOIN webhook_buckets b ON b.subscriber_id = s.id ";

// Surge's credentials table is there once Surge has migrated the file; `subscriber list` may
// read one it has not.
std::string select_columns(SQLite::Database& db) {
  if (!db.tableExists("surge_subscriber_credential")) {
    return std::string(base_columns) + from_tables;
  }
  return std::string(base_columns) +
         detail::credential_columns(sqlite::credentials_have_proxy(db)) + from_tables +
         detail::credential_join("s.id");
}

subscriber_row read_row(const SQLite::Statement& query) {
  subscriber_row row;
  row.id = query.getColumn(0).getInt64();
  row.url = query.getColumn(1).getString();
  row.secret = query.getColumn(2).getString();
  row.event_types = query.getColumn(3).getString();
  sqlite::read_limits(query, 4, 60.0, " (rate_per_min)", row);
  const bool has_bucket = !query.getColumn(6).isNull();
  row.tokens = has_bucket ? query.getColumn(6).getDouble() : static_cast<double>(row.burst);
  row.tokens_updated_at = has_bucket ? query.getColumn(7).getDouble() : 0;
  row.active = query.getColumn(8).getInt64() != 0;
  row.region = query.getColumn(9).getString();
  // Signed by the producer at enqueue; the shape knows no batches, coalescing or caps of
  // Surge's, so those keep their off values.
  row.signing = "stored";
  if (query.getColumnCount() > 10) sqlite::read_credentials(query, 10, row);
  return row;
}

// rate_per_min is an INTEGER column: the tools accept only whole requests per minute here.
std::int64_t per_minute(double rate_per_sec) { return std::llround(rate_per_sec * 60.0); }

// The shape stores the filter as a JSON array; a row loaded from it already holds one, the tools
// hand over Surge's comma-separated patterns.
std::string events_column(const std::string& event_types) {
  if (proto::parse_event_array(event_types)) return event_types;
  return proto::event_array_from_patterns(event_types);
}

void bind_settings(SQLite::Statement& statement, const subscriber_row& row) {
  statement.bind(1, row.url);
  statement.bind(2, row.secret);
  statement.bind(3, events_column(row.event_types));
  statement.bind(4, per_minute(row.rate_per_sec));
  statement.bind(5, row.burst);
  statement.bind(6, row.region);
  statement.bind(7, row.active ? 1 : 0);
}

}  // namespace

const ordered_index& ordered_claim_index() {
  static const ordered_index index{
      .create =
          "CREATE INDEX IF NOT EXISTS surge_deliveries_subscriber_order ON "
          "webhook_deliveries(subscriber_id) WHERE state = 'pending'",
      .drop = "DROP INDEX IF EXISTS surge_deliveries_subscriber_order",
  };
  return index;
}

std::vector<subscriber_row> load_subscribers(SQLite::Database& db, const proto::id_set& which) {
  return sqlite::load_rows(db, select_columns(db), "s.id", which, read_row);
}

std::optional<subscriber_row> load_subscriber(SQLite::Database& db, std::int64_t id) {
  return sqlite::load_row(db, select_columns(db), "s.id", id, read_row);
}

std::int64_t add_subscriber(SQLite::Database& db, const subscriber_row& row) {
  return sqlite::insert_row(db,
                            "INSERT INTO webhook_subscribers(endpoint, secret, events, "
                            "rate_per_min, burst, region, active, id) "
                            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                            8, row.id,
                            [&](SQLite::Statement& insert) { bind_settings(insert, row); });
}

bool update_subscriber(SQLite::Database& db, const subscriber_row& row) {
  sqlite::write_transaction transaction(db);
  SQLite::Statement update(db,
                           "UPDATE webhook_subscribers SET endpoint = ?, secret = ?, events = ?, "
                           "rate_per_min = ?, burst = ?, region = ?, active = ? WHERE id = ?");
  bind_settings(update, row);
  update.bind(8, row.id);
  const int changed = update.exec();
  transaction.commit();
  return changed > 0;
}

bool set_subscriber_active(SQLite::Database& db, std::int64_t id, bool active) {
  return sqlite::set_active(db, "webhook_subscribers", id, active);
}

}  // namespace surge::storage::sqlite::seed001
