#include "storage/sqlite/partner_quotas.hpp"

#include <SQLiteCpp/Statement.h>
#include <SQLiteCpp/Transaction.h>

#include "storage/sqlite/sql_support.hpp"

namespace surge::storage::sqlite {

void record_partner_quotas(SQLite::Database& db, std::span<const partner_quota_row> rows) {
  if (rows.empty()) return;
  SQLite::Transaction transaction(db, SQLite::TransactionBehavior::IMMEDIATE);
  SQLite::Statement upsert(
      db,
      "INSERT OR REPLACE INTO surge_partner_quota(subscriber_id, form, quota, window_seconds, "
      "remaining, reset_at, seen_at, paced_rate, paced_burst, paced_until) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  for (const auto& row : rows) {
    sqlite::statement_use use(upsert);
    upsert.bind(1, row.subscriber_id);
    upsert.bind(2, row.form);
    if (row.quota) {
      upsert.bind(3, *row.quota);
    } else {
      upsert.bind(3);
    }
    if (row.window_seconds) {
      upsert.bind(4, *row.window_seconds);
    } else {
      upsert.bind(4);
    }
    upsert.bind(5, row.remaining);
    upsert.bind(6, row.reset_at);
    upsert.bind(7, row.seen_at);
    upsert.bind(8, row.paced_rate);
    upsert.bind(9, row.paced_burst);
    upsert.bind(10, row.paced_until);
    upsert.exec();
  }
  transaction.commit();
}

std::vector<partner_quota_row> load_partner_quotas(SQLite::Database& db) {
  std::vector<partner_quota_row> out;
  if (!db.tableExists("surge_partner_quota")) return out;
  SQLite::Statement query(
      db,
      "SELECT subscriber_id, form, quota, window_seconds, remaining, reset_at, seen_at, "
      "paced_rate, paced_burst, paced_until FROM surge_partner_quota ORDER BY subscriber_id");
  while (query.executeStep()) {
    auto& row = out.emplace_back();
    row.subscriber_id = query.getColumn(0).getInt64();
    row.form = query.getColumn(1).getString();
    if (!query.getColumn(2).isNull()) row.quota = query.getColumn(2).getInt64();
    if (!query.getColumn(3).isNull()) row.window_seconds = query.getColumn(3).getDouble();
    row.remaining = query.getColumn(4).getInt64();
    row.reset_at = query.getColumn(5).getDouble();
    row.seen_at = query.getColumn(6).getDouble();
    row.paced_rate = query.getColumn(7).getDouble();
    row.paced_burst = query.getColumn(8).getDouble();
    row.paced_until = query.getColumn(9).getDouble();
  }
  return out;
}

}  // namespace surge::storage::sqlite
