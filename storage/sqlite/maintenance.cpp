#include "storage/sqlite/maintenance.hpp"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <SQLiteCpp/Statement.h>
#include <SQLiteCpp/Transaction.h>

#include "storage/sqlite/sql_support.hpp"

namespace surge::storage::sqlite {

namespace {

constexpr const char* number_types = "('integer', 'real')";

// The condition a malformed row meets; ?1 is now, ?2 the lease horizon. A far lease that a
// Surge claimer recorded is real: another drain may run with a longer --lease than ours.
std::string malformed_condition(const delivery_table& table, bool lease_records) {
  const std::string numbers = number_types;
  const std::string lease = table.lease;
  const std::string unrecorded =
      lease_records ? " AND " + lease + " NOT IN (SELECT lease FROM surge_lease)" : "";
  return std::string(table.outstanding) + " AND (typeof(" + lease + ") NOT IN " + numbers +
         " OR (" + lease + " > ?2" + unrecorded + ") OR (typeof(" + table.next_attempt +
         ") NOT IN " + numbers + " AND " + table.free_at("?1") + "))";
}

// Dead-letters rows by id, each with its reason: in the row's own last_error column, or in
// Surge's note beside a shape that has none. Inside the caller's transaction.
class dead_letterer {
 public:
  dead_letterer(SQLite::Database& db, const delivery_table& table, double now)
      : update_(db, "UPDATE " + std::string(table.name) + " SET " + table.dead + ", " +
                        table.lease + " = 0" +
                        (table.last_error ? std::string(", ") + table.last_error + " = ?2" : "") +
                        " WHERE id = ?1"),
        now_(now) {
    if (!table.last_error) note_.emplace(db, table.note);
  }

  void dead(std::int64_t id, const std::string& why) {
    {
      sqlite::statement_use use(update_);
      update_.bind(1, id);
      if (!note_) update_.bind(2, why);
      update_.exec();
    }
    if (!note_) return;
    sqlite::statement_use use(*note_);
    note_->bind(1, id);
    note_->bind(2);  // no response
    note_->bind(3, why);
    note_->bind(4, now_);
    note_->exec();
  }

 private:
  SQLite::Statement update_;
  std::optional<SQLite::Statement> note_;
  double now_;
};

}  // namespace

std::int64_t dead_letter_orphans(SQLite::Database& db, double now, const proto::id_set& which,
                                 const delivery_table& table) {
  // Orphans are rare; finding them reads the due index once, so callers run this seldom.
  SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
  std::vector<std::pair<std::int64_t, std::int64_t>> orphans;
  {
    SQLite::Statement find(
        db, "SELECT id, subscriber_id FROM " + std::string(table.name) + " WHERE " +
                table.outstanding + " AND " + table.next_attempt + " <= ?1 AND " +
                table.free_at("?1") + " AND " + detail::id_filter(which, "subscriber_id") +
                " AND subscriber_id NOT IN (SELECT id FROM " + table.subscriber_table + ")");
    find.bind(1, now);
    while (find.executeStep()) {
      orphans.emplace_back(find.getColumn(0).getInt64(), find.getColumn(1).getInt64());
    }
  }
  dead_letterer letter(db, table, now);
  for (const auto& [id, subscriber] : orphans) {
    letter.dead(id, "unknown subscriber " + std::to_string(subscriber));
  }
  transaction.commit();
  return static_cast<std::int64_t>(orphans.size());
}

malformed_rows dead_letter_malformed(SQLite::Database& db, double now, double lease_horizon,
                                     const proto::id_set& which, const delivery_table& table) {
  malformed_rows found;
  std::vector<std::int64_t> ids;
  const bool lease_records = db.tableExists("surge_lease");
  const std::string condition = malformed_condition(table, lease_records);
  {
    SQLite::Statement query(db, "SELECT id FROM " + std::string(table.name) + " WHERE " +
                                    condition + " AND " +
                                    detail::id_filter(which, "subscriber_id"));
    query.bind(1, now);
    query.bind(2, lease_horizon);
    while (query.executeStep()) ids.push_back(query.getColumn(0).getInt64());
  }
  if (ids.empty()) return found;
  const std::string numbers = number_types;
  const std::string lease = table.lease;
  const std::string next_attempt = table.next_attempt;
  SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
  // Each row is checked again under the write lock, and its reason read before it changes.
  SQLite::Statement reason(
      db, "SELECT CASE WHEN typeof(" + lease + ") NOT IN " + numbers + " THEN 'malformed " + lease +
              ": ' || quote(" + lease + ") WHEN " + lease + " > ?2 THEN 'implausible " + lease +
              ": ' || " + lease + " || ' is ' || CAST(round(" + lease +
              " - ?1) AS INTEGER) || ' s ahead, beyond any lease' ELSE 'malformed " + next_attempt +
              ": ' || quote(" + next_attempt + ") END FROM " + table.name + " WHERE id = ?3 AND " +
              condition);
  dead_letterer letter(db, table, now);
  for (const std::int64_t id : ids) {
    std::string why;
    {
      sqlite::statement_use use(reason);
      reason.bind(1, now);
      reason.bind(2, lease_horizon);
      reason.bind(3, id);
      if (!reason.executeStep()) continue;
      why = reason.getColumn(0).getString();
    }
    letter.dead(id, why);
    if (why.starts_with("malformed " + next_attempt)) {
      ++found.next_attempt_at;
    } else if (why.starts_with("malformed " + lease)) {
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
