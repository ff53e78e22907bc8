#include "storage/sqlite/backlog.hpp"

#include <SQLiteCpp/Statement.h>

#include "storage/sqlite/sql_support.hpp"

namespace surge::storage::sqlite {

std::vector<subscriber_backlog> backlog_by_subscriber(SQLite::Database& db, double overdue_before,
                                                      const proto::id_set& which) {
  // The status filter matches the partial index's WHERE, so the index covers the query and
  // is already in subscriber order; left alone, the planner picks idx_delivery_due and sorts
  // (0.12 s instead of 0.03 s for 100,000 queued rows).
  SQLite::Statement query(
      db,
      "SELECT subscriber_id, COUNT(*), SUM(next_attempt_at < ?1 AND created_at < ?1) "
      "FROM webhook_delivery "
      "INDEXED BY idx_delivery_subscriber_due WHERE status IN ('pending','retry') AND " +
          detail::id_filter(which, "subscriber_id") + " GROUP BY subscriber_id");
  query.bind(1, overdue_before);
  std::vector<subscriber_backlog> out;
  while (query.executeStep()) {
    out.push_back({.subscriber_id = query.getColumn(0).getInt64(),
                   .queued = query.getColumn(1).getInt64(),
                   .overdue = query.getColumn(2).getInt64()});
  }
  return out;
}

}  // namespace surge::storage::sqlite
