#include "storage/maintenance.hpp"

#include <SQLiteCpp/Statement.h>
#include <SQLiteCpp/Transaction.h>

#include "storage/sql_support.hpp"

namespace surge::storage {

std::int64_t dead_letter_orphans(SQLite::Database& db, double now, const proto::id_set& which) {
  // Orphans are rare; finding them reads the due index once, so callers run this seldom.
  const std::string filter = detail::id_filter(which, "subscriber_id");
  SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
  SQLite::Statement update(
      db,
      "UPDATE webhook_delivery SET status = 'dead', locked_until = 0, "
      "last_error = 'unknown subscriber ' || subscriber_id "
      "WHERE status IN ('pending', 'retry') AND next_attempt_at <= ?1 AND locked_until <= ?1 "
      "AND " + filter + " AND subscriber_id NOT IN (SELECT id FROM webhook_subscriber)");
  update.bind(1, now);
  const auto changed = update.exec();
  transaction.commit();
  return changed;
}

std::optional<double> earliest_scheduled(SQLite::Database& db, double now,
                                         const proto::id_set& which) {
  SQLite::Statement query(
      db,
      "SELECT MIN(next_attempt_at) FROM webhook_delivery "
      "WHERE status IN ('pending', 'retry') AND locked_until <= ?1 AND " +
          detail::id_filter(which, "subscriber_id"));
  query.bind(1, now);
  if (!query.executeStep() || query.getColumn(0).isNull()) return std::nullopt;
  return query.getColumn(0).getDouble();
}

}  // namespace surge::storage
