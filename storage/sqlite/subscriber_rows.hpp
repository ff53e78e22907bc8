#pragma once
// What both queue shapes' subscriber tables share once their names are given: reading the
// limits (a value that is not a number is kept, quoted, for the operator's message), loading
// rows by id with their ordered keys, inserting one under the id the caller chose or SQLite's,
// and switching one on or off. Not part of the storage API.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>

#include "proto/id_set.hpp"
#include "storage/sqlite/sql_support.hpp"
#include "storage/subscribers.hpp"

namespace surge::storage::sqlite {

// The rate at column `rate_column`, in requests per `rate_unit_seconds` (60 for a per-minute
// column), and the burst in the next column, into `row`. A value that is not a number reads NaN
// (rate) or 0 (burst), its stored text kept in rate_text or burst_text (with `rate_note` after
// the rate's).
void read_limits(const SQLite::Statement& query, int rate_column, double rate_unit_seconds,
                 std::string_view rate_note, subscriber_row& row);

using subscriber_reader = subscriber_row (*)(const SQLite::Statement& query);

// The rows `select` (ending before its WHERE) gives for the ids in `which`, by `id_column`, in
// id order, with their ordered keys.
std::vector<subscriber_row> load_rows(SQLite::Database& db, const std::string& select,
                                      std::string_view id_column, const proto::id_set& which,
                                      subscriber_reader read);
std::optional<subscriber_row> load_row(SQLite::Database& db, const std::string& select,
                                       std::string_view id_column, std::int64_t id,
                                       subscriber_reader read);

// Runs `insert` with its values bound by `bind` and the new row's id at `id_index` (the row's
// own, or NULL for SQLite to pick), in a write transaction; the id the row got.
template <class Bind>
std::int64_t insert_row(SQLite::Database& db, const char* insert_sql, int id_index, std::int64_t id,
                        Bind&& bind) {
  write_transaction transaction(db);
  SQLite::Statement insert(db, insert_sql);
  bind(insert);
  if (id != 0) {
    insert.bind(id_index, id);
  } else {
    insert.bind(id_index);  // NULL: SQLite picks the rowid
  }
  insert.exec();
  const std::int64_t inserted = db.getLastInsertRowid();
  transaction.commit();
  return inserted;
}

// Sets `active` of subscriber `id` in `table`; false when there is no such subscriber.
bool set_active(SQLite::Database& db, std::string_view table, std::int64_t id, bool active);

}  // namespace surge::storage::sqlite
