#include "storage/sqlite/maintenance.hpp"

#include <string>

#include <SQLiteCpp/Statement.h>
#include <SQLiteCpp/Transaction.h>

#include "storage/sqlite/sql_support.hpp"

namespace surge::storage::sqlite {

std::int64_t dead_letter_orphans(SQLite::Database& db, double now, const proto::id_set& which) {
  // Orphans are rare; finding them reads the due index once, so callers run this seldom.
  const std::string filter = detail::id_filter(which, "subscriber_id");
  SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
  SQLite::Statement update(
      db,
      "UPDATE webhook_delivery SET status = 'dead', locked_until = 0, "
      "last_error = 'unknown subscriber ' || subscriber_id "
      "WHERE status IN ('pending', 'retry') AND next_attempt_at <= ?1 AND locked_until <= ?1 "
      "AND " +
          filter + " AND subscriber_id NOT IN (SELECT id FROM webhook_subscriber)");
  update.bind(1, now);
  const auto changed = update.exec();
  transaction.commit();
  return changed;
}

namespace {

constexpr const char* number_types = "('integer', 'real')";

// The condition a malformed row meets; ?1 is now, ?2 the lease horizon. A far lease that a
// Surge claimer recorded is real: another drain may run with a longer --lease than ours.
std::string malformed_condition(bool lease_records) {
  const std::string numbers = number_types;
  const std::string unrecorded =
      lease_records ? " AND locked_until NOT IN (SELECT lease FROM surge_lease)" : "";
  return "status IN ('pending', 'retry') AND (typeof(locked_until) NOT IN " + numbers +
         " OR (locked_until > ?2" + unrecorded + ") OR (typeof(next_attempt_at) NOT IN " + numbers +
         " AND locked_until <= ?1))";
}

}  // namespace

malformed_rows dead_letter_malformed(SQLite::Database& db, double now, double lease_horizon,
                                     const proto::id_set& which) {
  malformed_rows found;
  std::vector<std::int64_t> ids;
  const bool lease_records = db.tableExists("surge_lease");
  {
    SQLite::Statement query(db, "SELECT id FROM webhook_delivery WHERE " +
                                    malformed_condition(lease_records) + " AND " +
                                    detail::id_filter(which, "subscriber_id"));
    query.bind(1, now);
    query.bind(2, lease_horizon);
    while (query.executeStep()) ids.push_back(query.getColumn(0).getInt64());
  }
  if (ids.empty()) return found;
  const std::string numbers = number_types;
  SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
  // The reason is chosen before status changes; RETURNING then reports which it was.
  SQLite::Statement update(
      db,
      "UPDATE webhook_delivery SET status = 'dead', locked_until = 0, last_error = CASE "
      "WHEN typeof(locked_until) NOT IN " +
          numbers +
          " THEN 'malformed locked_until: ' || quote(locked_until) "
          "WHEN locked_until > ?2 THEN 'implausible locked_until: ' || locked_until || "
          "' is ' || CAST(round(locked_until - ?1) AS INTEGER) || ' s ahead, beyond any lease' "
          "ELSE 'malformed next_attempt_at: ' || quote(next_attempt_at) END "
          "WHERE id = ?3 AND " +
          malformed_condition(lease_records) + " RETURNING last_error");
  for (const std::int64_t id : ids) {
    detail::statement_use use(update);
    update.bind(1, now);
    update.bind(2, lease_horizon);
    update.bind(3, id);
    if (!update.executeStep()) continue;
    const std::string reason = update.getColumn(0).getString();
    if (reason.starts_with("malformed next_attempt_at")) {
      ++found.next_attempt_at;
    } else if (reason.starts_with("malformed locked_until")) {
      ++found.locked_until;
    } else {
      ++found.far_lease;
    }
  }
  transaction.commit();
  return found;
}

std::vector<lease_holder> other_live_owners(SQLite::Database& db, double now,
                                            const proto::id_set& which, const std::string& self,
                                            const delivery_table& table) {
  std::vector<lease_holder> holders;
  if (!db.tableExists("surge_lease")) return holders;
  {
    // Usually no other drain holds a live lease, and then the join below, which reads every
    // outstanding row, is not needed (it cost a read of the whole backlog at every start).
    SQLite::Statement any(
        db, "SELECT EXISTS (SELECT 1 FROM surge_lease WHERE lease > ?1 AND owner <> ?2)");
    any.bind(1, now);
    any.bind(2, self);
    if (!any.executeStep() || any.getColumn(0).getInt() == 0) return holders;
  }
  SQLite::Statement query(
      db, "SELECT l.owner, d.subscriber_id, COUNT(*) FROM " + std::string(table.name) +
              " d JOIN surge_lease l ON l.lease = d." + table.lease + " WHERE d." +
              table.outstanding + " AND d." + table.lease + " > ?1 AND l.owner <> ?2 AND " +
              detail::id_filter(which, "d.subscriber_id") + " GROUP BY 1, 2 ORDER BY 1, 2");
  query.bind(1, now);
  query.bind(2, self);
  while (query.executeStep()) {
    const std::string owner = query.getColumn(0).getString();
    if (holders.empty() || holders.back().owner != owner) holders.push_back({.owner = owner});
    holders.back().subscribers.push_back(query.getColumn(1).getInt64());
    holders.back().rows += query.getColumn(2).getInt64();
  }
  return holders;
}

std::optional<double> earliest_scheduled(SQLite::Database& db, double now,
                                         const proto::id_set& which, const delivery_table& table) {
  SQLite::Statement query(db, "SELECT MIN(MAX(" + std::string(table.next_attempt) + ", " +
                                  table.created + ")) FROM " + table.name + " WHERE " +
                                  table.outstanding + " AND " + table.free_at("?1") + " AND " +
                                  detail::id_filter(which, "subscriber_id"));
  query.bind(1, now);
  if (!query.executeStep() || query.getColumn(0).isNull()) return std::nullopt;
  return query.getColumn(0).getDouble();
}

}  // namespace surge::storage::sqlite
