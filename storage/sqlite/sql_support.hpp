#pragma once
// Helpers shared by the SQLite sources (storage/sqlite/ and storage/seed001/), in the backend's
// namespace: not part of the storage API.
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
#include "storage/sql_support.hpp"
#include "storage/subscribers.hpp"

namespace surge::storage::sqlite {

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

// Reads credential_columns, starting at column `first`, into `row`.
inline void read_credentials(const SQLite::Statement& query, int first, subscriber_row& row) {
  row.extra_headers = proto::decode_header_fields(query.getColumn(first).getString());
  row.client_cert_file = query.getColumn(first + 1).getString();
  row.client_key_file = query.getColumn(first + 2).getString();
  row.proxy = query.getColumn(first + 3).getString();
}

// Whether the credentials table has schema 10's proxy column.
inline bool credentials_have_proxy(SQLite::Database& db) {
  SQLite::Statement query(db,
                          "SELECT 1 FROM pragma_table_info('surge_subscriber_credential') "
                          "WHERE name = 'proxy'");
  return query.executeStep();
}

}  // namespace surge::storage::sqlite
