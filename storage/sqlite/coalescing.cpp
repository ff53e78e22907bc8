#include "storage/sqlite/coalescing.hpp"

#include <SQLiteCpp/Statement.h>
#include <SQLiteCpp/Transaction.h>

#include "storage/sqlite/sql_support.hpp"

namespace surge::storage::sqlite {

unheld_backlog read_unheld_due_rows(SQLite::Database& db, std::int64_t subscriber_id, double now,
                                    int limit, std::int64_t max_payload_bytes,
                                    std::int64_t max_total_bytes) {
  // Read first: a row queued after it has a higher id, whether or not the rows below see it.
  const std::int64_t newest =
      db.execAndGet("SELECT COALESCE(MAX(id), 0) FROM webhook_delivery").getInt64();
  // The partial index on (subscriber_id, next_attempt_at) serves the scan.
  SQLite::Statement query(
      db,
      "SELECT id, event_type, created_at, CASE WHEN length(CAST(payload AS BLOB)) <= :cap "
      "THEN payload ELSE '' END, coalesced_since FROM webhook_delivery "
      "WHERE subscriber_id = :subscriber AND "
      "status IN ('pending','retry') AND next_attempt_at <= :now AND locked_until <= :now "
      "ORDER BY next_attempt_at, id LIMIT :limit");
  query.bind(":cap", max_payload_bytes);
  query.bind(":subscriber", subscriber_id);
  query.bind(":now", now);
  query.bind(":limit", limit);
  unheld_backlog backlog{.judged_through = newest};
  auto& rows = backlog.rows;
  std::int64_t total = 0;
  while (total <= max_total_bytes && query.executeStep()) {
    rows.push_back({.id = query.getColumn(0).getInt64(),
                    .event_type = query.getColumn(1).getString(),
                    .created_at = query.getColumn(2).getDouble(),
                    .payload = query.getColumn(3).getString()});
    if (!query.getColumn(4).isNull()) rows.back().coalesced_since = query.getColumn(4).getDouble();
    total += static_cast<std::int64_t>(rows.back().payload.size());
  }
  if (total > max_total_bytes || static_cast<int>(rows.size()) >= limit) {
    backlog.judged_through = highest_id_read(rows, newest);
  }
  return backlog;
}

int mark_coalesced(SQLite::Database& db, std::span<const replacement> rows, double now) {
  if (rows.empty()) return 0;
  SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
  SQLite::Statement update(
      db,
      "UPDATE webhook_delivery SET status = 'done', coalesced_into = :by, "
      "last_error = 'coalesced into delivery ' || :by WHERE id = :id AND "
      "status IN ('pending','retry') AND next_attempt_at <= :now AND locked_until <= :now");
  SQLite::Statement stands_for(
      db,
      "UPDATE webhook_delivery SET coalesced_since = MIN(COALESCE(coalesced_since, created_at), "
      ":since) WHERE id = :by AND status IN ('pending','retry') AND next_attempt_at <= :now AND "
      "locked_until <= :now");
  int marked = 0;
  for (const auto& row : rows) {
    {
      sqlite::statement_use use(stands_for);
      stands_for.bind(":since", row.stands_since);
      stands_for.bind(":by", row.replaced_by);
      stands_for.bind(":now", now);
      if (stands_for.exec() == 0) continue;
    }
    sqlite::statement_use use(update);
    update.bind(":by", row.replaced_by);
    update.bind(":id", row.id);
    update.bind(":now", now);
    marked += update.exec();
  }
  transaction.commit();
  return marked;
}

}  // namespace surge::storage::sqlite
