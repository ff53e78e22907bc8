// The partners' announced quotas on a PostgreSQL queue (storage/partner_quotas.hpp).
#include "storage/partner_quotas.hpp"
#include "storage/postgres/queue.hpp"

namespace surge::storage::pg {

void record_partner_quotas(session& db, std::span<const partner_quota_row> rows) {
  if (rows.empty()) return;
  transaction step(db);
  for (const auto& row : rows) {
    params values;
    values.add(row.subscriber_id).add(row.form);
    if (row.quota) {
      values.add(*row.quota);
    } else {
      values.add_null();
    }
    if (row.window_seconds) {
      values.add(*row.window_seconds);
    } else {
      values.add_null();
    }
    values.add(row.remaining)
        .add(row.reset_at)
        .add(row.seen_at)
        .add(row.paced_rate)
        .add(row.paced_burst)
        .add(row.paced_until);
    db.exec(
        "INSERT INTO surge_partner_quota(subscriber_id, form, quota, window_seconds, "
        "remaining, reset_at, seen_at, paced_rate, paced_burst, paced_until) "
        "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (subscriber_id) DO "
        "UPDATE SET form = EXCLUDED.form, quota = EXCLUDED.quota, "
        "window_seconds = EXCLUDED.window_seconds, remaining = EXCLUDED.remaining, "
        "reset_at = EXCLUDED.reset_at, seen_at = EXCLUDED.seen_at, "
        "paced_rate = EXCLUDED.paced_rate, paced_burst = EXCLUDED.paced_burst, "
        "paced_until = EXCLUDED.paced_until",
        values);
  }
  step.commit();
}

std::vector<partner_quota_row> load_partner_quotas(session& db) {
  const auto found = db.exec(
      "SELECT subscriber_id, form, quota, window_seconds, remaining, reset_at, seen_at, "
      "paced_rate, paced_burst, paced_until FROM surge_partner_quota ORDER BY subscriber_id");
  std::vector<partner_quota_row> out;
  for (int i = 0; i < found.rows(); ++i) {
    auto& row = out.emplace_back();
    row.subscriber_id = found.int64(i, 0);
    row.form = std::string(found.text(i, 1));
    if (!found.is_null(i, 2)) row.quota = found.int64(i, 2);
    if (!found.is_null(i, 3)) row.window_seconds = found.real(i, 3);
    row.remaining = found.int64(i, 4);
    row.reset_at = found.real(i, 5);
    row.seen_at = found.real(i, 6);
    row.paced_rate = found.real(i, 7);
    row.paced_burst = found.real(i, 8);
    row.paced_until = found.real(i, 9);
  }
  return out;
}

}  // namespace surge::storage::pg
