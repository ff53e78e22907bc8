#include "storage/sqlite/dead_letters.hpp"

#include <cmath>
#include <set>

#include <SQLiteCpp/Statement.h>
#include <SQLiteCpp/Transaction.h>

#include "storage/sqlite/ordered_keys.hpp"
#include "storage/sqlite/sql_support.hpp"

namespace surge::storage::sqlite {
namespace {

// The WHERE clause shared by list and replay; binds :since when set. Dead rows have no index of
// their own (the due indexes cover outstanding rows only), so this is one table scan: fine for
// an operator's command, not for a hot path.
std::string selection_sql(const delivery_table& table, const dead_selection& which) {
  std::string sql = "d." + std::string(table.status) + " = 'dead' AND " +
                    detail::id_filter(which.subscribers, "d.subscriber_id") + " AND " +
                    detail::id_filter(which.ids, "d.id");
  if (which.created_since) sql += " AND d." + std::string(table.created) + " >= :since";
  return sql;
}

void bind_selection(SQLite::Statement& statement, const dead_selection& which) {
  if (which.created_since) statement.bind(":since", *which.created_since);
  if (which.limit) statement.bind(":limit", *which.limit);
}

std::string newest_first(const delivery_table& table, const dead_selection& which) {
  return " ORDER BY d." + std::string(table.created) + " DESC, d.id DESC" +
         (which.limit ? " LIMIT :limit" : "");
}

// Where a row's last status and error are read from: its own columns, or Surge's note beside a
// shape that has none (`notes`: whether that table exists yet).
std::string reasons_of(const delivery_table& table, bool notes) {
  if (table.last_error) return "d.last_status, d.last_error";
  return notes ? "n.last_status, n.last_error" : "NULL, NULL";
}
std::string reasons_join(const delivery_table& table, bool notes) {
  if (table.last_error || !notes) return "";
  return " LEFT JOIN " + std::string(table.notes) + " n ON n.delivery_id = d.id";
}

}  // namespace

std::vector<dead_row> list_dead(SQLite::Database& db, const dead_selection& which,
                                const delivery_table& table) {
  const bool notes = table.notes && db.tableExists(table.notes);
  SQLite::Statement query(db, "SELECT d.id, d.subscriber_id, d.event_type, d." +
                                  std::string(table.attempts) + ", " + reasons_of(table, notes) +
                                  ", d." + table.created + " FROM " + table.name + " d" +
                                  reasons_join(table, notes) + " WHERE " +
                                  selection_sql(table, which) + newest_first(table, which));
  bind_selection(query, which);
  std::vector<dead_row> rows;
  while (query.executeStep()) {
    dead_row& row = rows.emplace_back();
    row.id = query.getColumn(0).getInt64();
    row.subscriber_id = query.getColumn(1).getInt64();
    row.event_type = query.getColumn(2).getString();
    row.attempts = query.getColumn(3).getInt64();
    row.last_status = query.getColumn(4).isNull() ? 0 : query.getColumn(4).getInt();
    row.last_error = query.getColumn(5).isNull() ? "" : query.getColumn(5).getString();
    row.created_at = query.getColumn(6).getDouble();
  }
  return rows;
}

replay_report replay_dead(SQLite::Database& db, const dead_selection& which, double now,
                          const delivery_table& table) {
  // With a limit the newest rows are chosen, as `dead list` would show them. The row's creation
  // time is now too: both drainers measure the retry window from it. A stored signature stays:
  // it covers the payload, which does not change.
  const std::string where = "id IN (SELECT d.id FROM " + std::string(table.name) + " d WHERE " +
                            selection_sql(table, which) +
                            (which.limit ? newest_first(table, which) : "") + ")";
  replay_report report;
  SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
  std::set<std::int64_t> subscribers;
  std::vector<std::int64_t> replayed;
  {
    SQLite::Statement update(db, "UPDATE " + std::string(table.name) + " SET " + table.pending +
                                     ", " + table.attempts + " = 0, " + table.next_attempt +
                                     " = :now, " + table.lease + " = 0, " + table.created +
                                     " = :now WHERE " + where + " RETURNING subscriber_id, id");
    if (table.whole_seconds) {
      update.bind(":now", static_cast<std::int64_t>(std::floor(now)));
    } else {
      update.bind(":now", now);
    }
    bind_selection(update, which);
    while (update.executeStep()) {
      ++report.replayed;
      subscribers.insert(update.getColumn(0).getInt64());
      replayed.push_back(update.getColumn(1).getInt64());
    }
  }
  resume_keys_stopped_by(db, replayed);
  SQLite::Statement active(
      db, "SELECT active FROM " + std::string(table.subscriber_table) + " WHERE id = ?");
  for (const std::int64_t id : subscribers) {
    sqlite::statement_use use(active);
    active.bind(1, id);
    if (!active.executeStep() || active.getColumn(0).getInt() == 0) {
      report.inactive_subscribers.push_back(id);
    }
  }
  transaction.commit();
  return report;
}

std::optional<delivery_detail> find_delivery(SQLite::Database& db, std::int64_t id,
                                             const delivery_table& table) {
  const bool attempts = db.tableExists("surge_attempt");
  const bool notes = table.notes && db.tableExists(table.notes);
  SQLite::Statement query(
      db, "SELECT d.id, d.subscriber_id, d.event_type, d." + std::string(table.status) + ", d." +
              table.attempts + ", " + reasons_of(table, notes) + ", d." + table.created + ", " +
              (attempts ? "(SELECT MAX(finished_at) FROM surge_attempt WHERE delivery_id = d.id)"
                        : "NULL") +
              ", d.payload FROM " + table.name + " d" + reasons_join(table, notes) +
              " WHERE d.id = ?");
  query.bind(1, id);
  if (!query.executeStep()) return std::nullopt;
  return delivery_detail_from(query);
}

delivery_detail delivery_detail_from(SQLite::Statement& query) {
  delivery_detail row;
  row.id = query.getColumn(0).getInt64();
  row.subscriber_id = query.getColumn(1).getInt64();
  row.event_type = query.getColumn(2).getString();
  row.status = query.getColumn(3).getString();
  row.attempts = query.getColumn(4).getInt64();
  row.last_status = query.getColumn(5).isNull() ? 0 : query.getColumn(5).getInt();
  row.last_error = query.getColumn(6).isNull() ? "" : query.getColumn(6).getString();
  row.created_at = query.getColumn(7).getDouble();
  if (!query.getColumn(8).isNull()) row.finished_at = query.getColumn(8).getDouble();
  row.payload = query.getColumn(9).getString();
  return row;
}

}  // namespace surge::storage::sqlite
