#include "storage/sqlite/subscribers.hpp"

#include <SQLiteCpp/Statement.h>
#include <SQLiteCpp/Transaction.h>

#include "storage/sqlite/schema.hpp"
#include "storage/sqlite/sql_support.hpp"
#include "storage/sqlite/subscriber_rows.hpp"

namespace surge::storage::sqlite {
namespace {

constexpr const char* base_columns =
    "SELECT id, url, secret, event_types, rate_per_sec, burst, tokens, tokens_updated_at, "
    "active, signing, max_in_flight";
// Added by schema 3; a file not migrated that far (read by `subscriber list`) has the defaults.
constexpr const char* batch_columns =
    ", batch_max, batch_bytes, batch_linger, coalesce_key, coalesce_window, coalesce_events";

std::string select_columns(SQLite::Database& db) {
  std::string sql = base_columns;
  if (schema_version(db) < 3) return sql + " FROM webhook_subscriber ";
  sql += batch_columns;
  // Added by schema 8.
  if (!db.tableExists("surge_subscriber_credential")) return sql + " FROM webhook_subscriber ";
  return sql + detail::credential_columns(sqlite::credentials_have_proxy(db)) +
         " FROM webhook_subscriber" + detail::credential_join("webhook_subscriber.id");
}

subscriber_row read_row(const SQLite::Statement& query) {
  subscriber_row row;
  row.id = query.getColumn(0).getInt64();
  row.url = query.getColumn(1).getString();
  row.secret = query.getColumn(2).getString();
  row.event_types = query.getColumn(3).getString();
  sqlite::read_limits(query, 4, 1.0, "", row);
  row.tokens = query.getColumn(6).getDouble();
  row.tokens_updated_at = query.getColumn(7).getDouble();
  row.active = query.getColumn(8).getInt64() != 0;
  row.signing = query.getColumn(9).getString();
  row.max_in_flight = query.getColumn(10).getInt64();
  if (query.getColumnCount() > 11) {
    row.batch_max = query.getColumn(11).getInt64();
    row.batch_bytes = query.getColumn(12).getInt64();
    row.batch_linger = query.getColumn(13).getDouble();
    row.coalesce_key = query.getColumn(14).getString();
    row.coalesce_window = query.getColumn(15).getDouble();
    row.coalesce_events = query.getColumn(16).getString();
  }
  if (query.getColumnCount() > 17) sqlite::read_credentials(query, 17, row);
  return row;
}

// Binds the columns update_subscriber and add_subscriber share, from index 1.
void bind_settings(SQLite::Statement& statement, const subscriber_row& row) {
  statement.bind(1, row.url);
  statement.bind(2, row.secret);
  statement.bind(3, row.event_types);
  statement.bind(4, row.rate_per_sec);
  statement.bind(5, row.burst);
  statement.bind(6, row.active ? 1 : 0);
  statement.bind(7, row.signing);
  statement.bind(8, row.max_in_flight);
  statement.bind(9, row.batch_max);
  statement.bind(10, row.batch_bytes);
  statement.bind(11, row.batch_linger);
  statement.bind(12, row.coalesce_key);
  statement.bind(13, row.coalesce_window);
  statement.bind(14, row.coalesce_events);
}

}  // namespace

std::vector<subscriber_row> load_subscribers(SQLite::Database& db, const proto::id_set& which) {
  return sqlite::load_rows(db, select_columns(db), "id", which, read_row);
}

std::optional<subscriber_row> load_subscriber(SQLite::Database& db, std::int64_t id) {
  return sqlite::load_row(db, select_columns(db), "id", id, read_row);
}

std::int64_t add_subscriber(SQLite::Database& db, const subscriber_row& row) {
  return sqlite::insert_row(
      db,
      "INSERT INTO webhook_subscriber(url, secret, event_types, rate_per_sec, burst, active, "
      "signing, max_in_flight, batch_max, batch_bytes, batch_linger, coalesce_key, "
      "coalesce_window, coalesce_events, tokens, tokens_updated_at, id) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
      17, row.id, [&](SQLite::Statement& insert) {
        bind_settings(insert, row);
        insert.bind(15, row.tokens);
        insert.bind(16, row.tokens_updated_at);
      });
}

bool update_subscriber(SQLite::Database& db, const subscriber_row& row) {
  sqlite::write_transaction transaction(db);
  SQLite::Statement update(
      db,
      "UPDATE webhook_subscriber SET url = ?, secret = ?, event_types = ?, rate_per_sec = ?, "
      "burst = ?, active = ?, signing = ?, max_in_flight = ?, batch_max = ?, batch_bytes = ?, "
      "batch_linger = ?, coalesce_key = ?, coalesce_window = ?, coalesce_events = ? "
      "WHERE id = ?");
  bind_settings(update, row);
  update.bind(15, row.id);
  const int changed = update.exec();
  transaction.commit();
  return changed > 0;
}

void set_subscriber_credentials(SQLite::Database& db, const subscriber_row& row) {
  sqlite::write_transaction transaction(db);
  if (row.extra_headers.empty() && row.client_cert_file.empty() && row.client_key_file.empty() &&
      row.proxy.empty()) {
    SQLite::Statement remove(db, "DELETE FROM surge_subscriber_credential WHERE subscriber_id = ?");
    remove.bind(1, row.id);
    remove.exec();
  } else {
    SQLite::Statement upsert(db,
                             "INSERT OR REPLACE INTO surge_subscriber_credential(subscriber_id, "
                             "headers, client_cert, client_key, proxy) VALUES (?, ?, ?, ?, ?)");
    upsert.bind(1, row.id);
    upsert.bind(2, proto::encode_header_fields(row.extra_headers));
    upsert.bind(3, row.client_cert_file);
    upsert.bind(4, row.client_key_file);
    upsert.bind(5, row.proxy);
    upsert.exec();
  }
  transaction.commit();
}

bool set_subscriber_active(SQLite::Database& db, std::int64_t id, bool active) {
  return sqlite::set_active(db, "webhook_subscriber", id, active);
}

}  // namespace surge::storage::sqlite
