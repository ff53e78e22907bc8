#include "storage/sqlite/dead_letters.hpp"

#include <set>

#include <SQLiteCpp/Statement.h>
#include <SQLiteCpp/Transaction.h>

#include "storage/sqlite/ordered_keys.hpp"
#include "storage/sqlite/sql_support.hpp"

namespace surge::storage::sqlite {
namespace {

// The WHERE clause shared by list and replay; binds :since when set. Dead rows have no index of
// their own (the due indexes cover pending/retry only), so this is one table scan: fine for an
// operator's command, not for a hot path.
std::string selection_sql(const dead_selection& which) {
  std::string sql = "status = 'dead' AND " + detail::id_filter(which.subscribers, "subscriber_id") +
                    " AND " + detail::id_filter(which.ids, "id");
  if (which.created_since) sql += " AND created_at >= :since";
  return sql;
}

void bind_selection(SQLite::Statement& statement, const dead_selection& which) {
  if (which.created_since) statement.bind(":since", *which.created_since);
  if (which.limit) statement.bind(":limit", *which.limit);
}

std::string newest_first(const dead_selection& which) {
  return std::string(" ORDER BY created_at DESC, id DESC") + (which.limit ? " LIMIT :limit" : "");
}

}  // namespace

std::vector<dead_row> list_dead(SQLite::Database& db, const dead_selection& which) {
  SQLite::Statement query(db,
                          "SELECT id, subscriber_id, event_type, attempts, last_status, "
                          "last_error, created_at FROM webhook_delivery WHERE " +
                              selection_sql(which) + newest_first(which));
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

replay_report replay_dead(SQLite::Database& db, const dead_selection& which, double now) {
  // With a limit the newest rows are chosen by a subquery, as `dead list` would show them.
  const std::string where = which.limit ? "id IN (SELECT id FROM webhook_delivery WHERE " +
                                              selection_sql(which) + newest_first(which) + ")"
                                        : selection_sql(which);
  replay_report report;
  SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
  std::set<std::int64_t> subscribers;
  std::vector<std::int64_t> replayed;
  {
    SQLite::Statement update(db,
                             "UPDATE webhook_delivery SET status = 'pending', attempts = 0, "
                             "next_attempt_at = :now, locked_until = 0, created_at = :now "
                             "WHERE " +
                                 where + " RETURNING subscriber_id, id");
    update.bind(":now", now);
    bind_selection(update, which);
    while (update.executeStep()) {
      ++report.replayed;
      subscribers.insert(update.getColumn(0).getInt64());
      replayed.push_back(update.getColumn(1).getInt64());
    }
  }
  resume_keys_stopped_by(db, replayed);
  SQLite::Statement active(db, "SELECT active FROM webhook_subscriber WHERE id = ?");
  for (const std::int64_t id : subscribers) {
    detail::statement_use use(active);
    active.bind(1, id);
    if (!active.executeStep() || active.getColumn(0).getInt() == 0) {
      report.inactive_subscribers.push_back(id);
    }
  }
  transaction.commit();
  return report;
}

std::optional<delivery_detail> find_delivery(SQLite::Database& db, std::int64_t id) {
  const bool attempts = db.tableExists("surge_attempt");
  SQLite::Statement query(
      db, std::string("SELECT id, subscriber_id, event_type, status, attempts, last_status, "
                      "last_error, created_at, ") +
              (attempts ? "(SELECT MAX(finished_at) FROM surge_attempt WHERE delivery_id = d.id)"
                        : "NULL") +
              ", payload FROM webhook_delivery d WHERE id = ?");
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
