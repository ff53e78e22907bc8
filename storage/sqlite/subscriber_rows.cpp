#include "storage/sqlite/subscriber_rows.hpp"

#include <limits>

#include <SQLiteCpp/Transaction.h>

#include "storage/sqlite/ordered_keys.hpp"

namespace surge::storage::sqlite {

namespace {

bool is_number(const SQLite::Column& column) { return column.isInteger() || column.isFloat(); }

// As SQLite's quote() would show it, for messages about a value that is not a number.
std::string quoted(const SQLite::Column& column) {
  if (column.isNull()) return "NULL";
  if (column.isBlob()) return "a blob of " + std::to_string(column.getBytes()) + " bytes";
  std::string text = "'";
  for (const char c : column.getString()) text += c == '\'' ? std::string("''") : std::string(1, c);
  return text + "'";
}

}  // namespace

void read_limits(const SQLite::Statement& query, int rate_column, double rate_unit_seconds,
                 std::string_view rate_note, subscriber_row& row) {
  const auto rate = query.getColumn(rate_column);
  const auto burst = query.getColumn(rate_column + 1);
  row.rate_per_sec = rate.getDouble() / rate_unit_seconds;
  row.burst = burst.getInt64();
  if (!is_number(rate)) {
    row.rate_text = quoted(rate) + std::string(rate_note);
    row.rate_per_sec = std::numeric_limits<double>::quiet_NaN();
  }
  if (!is_number(burst)) {
    row.burst_text = quoted(burst);
    row.burst = 0;
  }
}

std::vector<subscriber_row> load_rows(SQLite::Database& db, const std::string& select,
                                      std::string_view id_column, const proto::id_set& which,
                                      subscriber_reader read) {
  SQLite::Statement query(db, select + "WHERE " + detail::id_filter(which, id_column) +
                                  " ORDER BY " + std::string(id_column));
  std::vector<subscriber_row> rows;
  while (query.executeStep()) rows.push_back(read(query));
  sqlite::read_subscriber_orders(db, rows);
  return rows;
}

std::optional<subscriber_row> load_row(SQLite::Database& db, const std::string& select,
                                       std::string_view id_column, std::int64_t id,
                                       subscriber_reader read) {
  SQLite::Statement query(db, select + "WHERE " + std::string(id_column) + " = ?");
  query.bind(1, id);
  if (!query.executeStep()) return std::nullopt;
  auto row = read(query);
  sqlite::read_subscriber_orders(db, std::span(&row, 1));
  return row;
}

bool set_active(SQLite::Database& db, std::string_view table, std::int64_t id, bool active) {
  SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
  SQLite::Statement update(db, "UPDATE " + std::string(table) + " SET active = ? WHERE id = ?");
  update.bind(1, active ? 1 : 0);
  update.bind(2, id);
  const int changed = update.exec();
  transaction.commit();
  return changed > 0;
}

}  // namespace surge::storage::sqlite
