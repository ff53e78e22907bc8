#pragma once
// Helpers shared by the storage sources; not part of the storage API.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include <SQLiteCpp/Statement.h>
#include <SQLiteCpp/Transaction.h>
#include <sqlite3.h>

#include "proto/extra_headers.hpp"
#include "proto/id_set.hpp"
#include "storage/subscribers.hpp"

namespace surge::storage::detail {

// Resets a reused prepared statement when a use of it ends, however it ends. A statement left
// mid-step would keep its read snapshot open; and SQLiteCpp's reset() rethrows the error of a
// failed step, so a statement that failed once would fail every later use if reset() were used.
class statement_use {
 public:
  explicit statement_use(SQLite::Statement& statement) : statement_(statement) {
    statement_.tryReset();
  }
  ~statement_use() { statement_.tryReset(); }
  statement_use(const statement_use&) = delete;
  statement_use& operator=(const statement_use&) = delete;

 private:
  SQLite::Statement& statement_;
};

// A write transaction (BEGIN IMMEDIATE), or a part of the caller's when one is open already: a
// function that writes in a transaction of its own can also be one step of a larger one, which
// then commits or rolls back everything together.
class write_transaction {
 public:
  explicit write_transaction(SQLite::Database& db) {
    if (sqlite3_get_autocommit(db.getHandle()) != 0) {
      own_.emplace(db, SQLite::TransactionBehavior::IMMEDIATE);
    }
  }
  void commit() {
    if (own_) own_->commit();
  }

 private:
  std::optional<SQLite::Transaction> own_;
};

// A row's attempts as the drain counts from it: within 0 and one below the narrowest column
// that holds it (PostgreSQL's integer), so the count written after an attempt always fits,
// whatever another program stored. A negative count is a row never attempted.
inline std::int64_t attempts_in_range(std::int64_t stored) {
  return std::clamp<std::int64_t>(stored, 0, std::numeric_limits<std::int32_t>::max() - 1);
}

// "?3, ?4, ..., ?(first + count - 1)": numbered parameters for a statement of several ids.
inline std::string numbered_placeholders(int first, int count) {
  std::string text;
  for (int i = 0; i < count; ++i) text += (i ? ", ?" : "?") + std::to_string(first + i);
  return text;
}

// A boolean SQL expression selecting `column` values in `which` ("1" when all): integer literals
// only, so it is safe to splice into statement text; valid SQL for SQLite and PostgreSQL alike.
std::string id_filter(const proto::id_set& which, std::string_view column);

// Surge's per-subscriber credentials (surge_subscriber_credential), read beside either shape's
// subscriber rows: the three columns to select, and the join naming the subscriber id column.
constexpr const char* credential_columns =
    ", COALESCE(c.headers, ''), COALESCE(c.client_cert, ''), COALESCE(c.client_key, '')";
inline void read_credentials(const SQLite::Statement& query, int first, subscriber_row& row) {
  row.extra_headers = proto::decode_header_fields(query.getColumn(first).getString());
  row.client_cert_file = query.getColumn(first + 1).getString();
  row.client_key_file = query.getColumn(first + 2).getString();
}
inline std::string credential_join(std::string_view subscriber_id) {
  return " LEFT JOIN surge_subscriber_credential c ON c.subscriber_id = " +
         std::string(subscriber_id) + " ";
}

}  // namespace surge::storage::detail
