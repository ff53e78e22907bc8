#pragma once
// What a storage::connection holds, and the one place that turns a SQLite error into a
// storage::error. Private to storage/: only its sources include this.
#include <memory>
#include <optional>
#include <utility>

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Exception.h>

#include "storage/connection.hpp"
#include "storage/postgres/session.hpp"

namespace surge::storage {

struct connection::backend {
  std::optional<SQLite::Database> sqlite;
  std::unique_ptr<pg::session> postgres;
};

// SQLITE_BUSY and SQLITE_LOCKED: another writer held the lock past the wait; SQLITE_FULL: the
// disk (or max_page_count) refused to grow the file or its WAL.
error from_sqlite(const SQLite::Exception& failure);

// Runs `on_sqlite(SQLite::Database&)` or `on_postgres(pg::session&)`, whichever the connection
// is, with SQLite's errors as storage::error.
template <class OnSqlite, class OnPostgres>
decltype(auto) on_backend(connection& db, OnSqlite&& on_sqlite, OnPostgres&& on_postgres) {
  auto& held = db.get();
  if (held.postgres) return std::forward<OnPostgres>(on_postgres)(*held.postgres);
  try {
    return std::forward<OnSqlite>(on_sqlite)(*held.sqlite);
  } catch (const SQLite::Exception& failure) {
    throw from_sqlite(failure);
  }
}

// For what exists only on SQLite so far.
[[noreturn]] void not_on_postgres(std::string_view what);

}  // namespace surge::storage
