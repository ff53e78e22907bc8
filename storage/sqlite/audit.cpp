#include "storage/sqlite/audit.hpp"

#include <map>

#include <SQLiteCpp/Statement.h>
#include <SQLiteCpp/Transaction.h>

#include "storage/sqlite/schema.hpp"
#include "storage/sqlite/sql_support.hpp"

namespace surge::storage::sqlite {

namespace {

// The audit of the attempts in surge_attempt (the same table on either queue shape) against
// `limits`, inside a read transaction the caller holds.
std::vector<audit_entry> read_attempts(SQLite::Database& db,
                                       std::map<std::int64_t, audit_limit> limits,
                                       const proto::id_set& which, bool with_delivered) {
  // A batch POST left one record per row; its first row's record stands for the request.
  const bool batches = schema_version(db) >= 3;
  SQLite::Statement query(
      db, std::string("SELECT subscriber_id, started_at, finished_at, "
                      "COALESCE(status_code, 0), ") +
              (batches ? "batch_size" : "1") + " FROM surge_attempt WHERE " +
              (batches ? "(batch_lead IS NULL OR batch_lead = delivery_id) AND " : "") +
              detail::id_filter(which, "subscriber_id") + " ORDER BY subscriber_id, started_at");
  audit_collector collect(std::move(limits), with_delivered);
  while (query.executeStep()) {
    collect.add(query.getColumn(0).getInt64(),
                {query.getColumn(1).getDouble(), query.getColumn(2).getDouble(),
                 query.getColumn(3).getInt(), query.getColumn(4).getInt64()});
  }
  return collect.finish();
}

}  // namespace

std::vector<audit_entry> read_audit(SQLite::Database& db, const proto::id_set& which,
                                    bool with_delivered, const delivery_table& table) {
  if (!db.tableExists("surge_attempt")) return {};
  // One snapshot: the limits and the attempts read together.
  SQLite::Transaction snapshot(db, SQLite::TransactionBehavior::DEFERRED);
  std::map<std::int64_t, audit_limit> limits;
  for (const auto& row : table.load_subscribers(db, which)) {
    // A rate stored as text reads NaN (subscriber_row); judge it as 0, as SQLite would read it.
    limits[row.id] = {row.rate_text ? 0.0 : row.rate_per_sec, row.burst, row.active};
  }
  auto entries = read_attempts(db, std::move(limits), which, with_delivered);
  snapshot.commit();
  return entries;
}

}  // namespace surge::storage::sqlite
