// Housekeeping on a seed001 queue: rows nobody can deliver, other drains' leases, retention.
#include <SQLiteCpp/Statement.h>
#include <SQLiteCpp/Transaction.h>

#include "storage/seed001/queue.hpp"
#include "storage/seed001/sql.hpp"
#include "storage/sqlite/database.hpp"
#include "storage/sqlite/sql_support.hpp"

namespace surge::storage::sqlite::seed001 {
namespace {

constexpr const char* number_types = "('integer', 'real')";

// The condition a malformed row meets; ?1 is now, ?2 the lease horizon (as on seed000).
std::string malformed_condition(bool lease_records) {
  const std::string numbers = number_types;
  const std::string unrecorded =
      lease_records ? " AND leased_until NOT IN (SELECT lease FROM surge_lease)" : "";
  return "state = 'pending' AND (typeof(leased_until) NOT IN " + numbers +
         " OR (leased_until > ?2" + unrecorded + ") OR (typeof(next_attempt) NOT IN " + numbers +
         " AND " + free_at("?1") + "))";
}

void note(SQLite::Statement& statement, std::int64_t id, const std::string& reason, double now) {
  detail::statement_use use(statement);
  statement.bind(1, id);
  statement.bind(2);
  statement.bind(3, reason);
  statement.bind(4, now);
  statement.exec();
}

}  // namespace

std::int64_t dead_letter_orphans(SQLite::Database& db, double now, const proto::id_set& which) {
  SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
  std::vector<std::pair<std::int64_t, std::int64_t>> dead;
  {
    SQLite::Statement update(db,
                             "UPDATE webhook_deliveries SET state = 'dead', leased_until = 0 "
                             "WHERE state = 'pending' AND next_attempt <= ?1 AND " +
                                 free_at("?1") + " AND " +
                                 detail::id_filter(which, "subscriber_id") +
                                 " AND subscriber_id NOT IN (SELECT id FROM webhook_subscribers) "
                                 "RETURNING id, subscriber_id");
    update.bind(1, now);
    while (update.executeStep()) {
      dead.emplace_back(update.getColumn(0).getInt64(), update.getColumn(1).getInt64());
    }
  }
  SQLite::Statement notes(db, note_sql);
  for (const auto& [id, subscriber] : dead) {
    note(notes, id, "unknown subscriber " + std::to_string(subscriber), now);
  }
  transaction.commit();
  return static_cast<std::int64_t>(dead.size());
}

malformed_rows dead_letter_malformed(SQLite::Database& db, double now, double lease_horizon,
                                     const proto::id_set& which) {
  malformed_rows found;
  std::vector<std::int64_t> ids;
  const bool lease_records = db.tableExists("surge_lease");
  {
    SQLite::Statement query(db, "SELECT id FROM webhook_deliveries WHERE " +
                                    malformed_condition(lease_records) + " AND " +
                                    detail::id_filter(which, "subscriber_id"));
    query.bind(1, now);
    query.bind(2, lease_horizon);
    while (query.executeStep()) ids.push_back(query.getColumn(0).getInt64());
  }
  if (ids.empty()) return found;
  const std::string numbers = number_types;
  SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
  // The reason is read before the row changes; the note keeps it, as seed000's last_error does.
  SQLite::Statement reason(
      db, "SELECT CASE WHEN typeof(leased_until) NOT IN " + numbers +
              " THEN 'malformed leased_until: ' || quote(leased_until) "
              "WHEN leased_until > ?2 THEN 'implausible leased_until: ' || leased_until || "
              "' is ' || CAST(round(leased_until - ?1) AS INTEGER) || ' s ahead, beyond any "
              "lease' ELSE 'malformed next_attempt: ' || quote(next_attempt) END "
              "FROM webhook_deliveries WHERE id = ?3 AND " +
              malformed_condition(lease_records));
  SQLite::Statement update(db,
                           "UPDATE webhook_deliveries SET state = 'dead', leased_until = 0 "
                           "WHERE id = ?");
  SQLite::Statement notes(db, note_sql);
  for (const std::int64_t id : ids) {
    std::string why;
    {
      detail::statement_use use(reason);
      reason.bind(1, now);
      reason.bind(2, lease_horizon);
      reason.bind(3, id);
      if (!reason.executeStep()) continue;
      why = reason.getColumn(0).getString();
    }
    {
      detail::statement_use use(update);
      update.bind(1, id);
      update.exec();
    }
    note(notes, id, why, now);
    if (why.starts_with("malformed next_attempt")) {
      ++found.next_attempt_at;
    } else if (why.starts_with("malformed leased_until")) {
      ++found.locked_until;
    } else {
      ++found.far_lease;
    }
  }
  transaction.commit();
  return found;
}

prune_result prune(SQLite::Database& db, const prune_options& options,
                   const std::function<void(const prune_result&)>& progress) {
  return sqlite::prune(db, options, progress, seed001_deliveries());
}

}  // namespace surge::storage::sqlite::seed001
